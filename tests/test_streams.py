"""evo/commands/streams.py: while a command works, what Python code, C code and child processes
print goes to standard error, and standard output is the command's own again afterwards."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import os, subprocess, sys
from evo.commands.streams import output_to_stderr
print("before")
with output_to_stderr():
    print("python")
    os.write(1, b"descriptor\\n")
    subprocess.run([sys.executable, "-c", "print('child')"], check=True)
print("after")
"""


def test_what_is_printed_inside_goes_to_stderr_and_stdout_comes_back():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["before", "after"]
    assert result.stderr.splitlines() == ["python", "descriptor", "child"]
