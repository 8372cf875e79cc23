"""Reading runs from anywhere: `evo show` and `evo report` on a run directory they cannot write
(a read-only filesystem: a real read-only bind mount in a user namespace), and program text
printed to a terminal with its escape codes escaped."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evo.database import Database, DatabaseConfig
from evo.scores import Evaluation
from tests.test_run_cli import evo, problem  # noqa: F401  (the fixture)


def read_only_namespace_works(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.mkdir()
    script = f"mount --bind {probe} {probe} && mount -o remount,bind,ro {probe} && ! touch {probe}/x 2>/dev/null"
    return subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True).returncode == 0


def test_show_and_report_read_a_run_on_a_read_only_filesystem(problem, tmp_path):  # noqa: F811
    if not read_only_namespace_works(tmp_path):
        pytest.skip("no user and mount namespaces here (unshare -rm) to make a read-only filesystem")
    out = tmp_path / "run"
    made = evo("run", str(problem), "--policy", "mutate:", "--iterations", "4", "--out", str(out), "--quiet")
    assert made.returncode == 0, made.stderr
    files = sorted(p.name for p in out.iterdir())
    assert evo("show", str(out)).returncode == 0 and evo("show", str(out), "--json").returncode == 0
    assert sorted(p.name for p in out.iterdir()) == files  # reading a finished run leaves no -wal or -shm behind
    python = shlex.quote(sys.executable)
    script = (f"mount --bind {out} {out} && mount -o remount,bind,ro {out} && "
              f"{python} -m evo show {out} --json > {tmp_path}/show.json && "
              f"{python} -m evo report {out} --out {tmp_path}/report.html")
    result = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((tmp_path / "show.json").read_text())["iterations"] == 4
    assert "<html" in (tmp_path / "report.html").read_text()
    assert sorted(p.name for p in out.iterdir()) == files  # nothing was written there


def test_show_escapes_control_characters_in_program_text(tmp_path):
    code = 'A = 1.0\nNOTE = "\x1b[2J\x1b]0;pwned\x07 \u202e"\n'
    with Database.open(tmp_path, DatabaseConfig(("fa",))) as db:
        db.add_initial(code, Evaluation(np.array([0.5])))
    result = subprocess.run([sys.executable, "-m", "evo", "show", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout and "\u202e" not in result.stdout
    assert "\\x1b[2J" in result.stdout and "\\u202e" in result.stdout and "A = 1.0" in result.stdout
