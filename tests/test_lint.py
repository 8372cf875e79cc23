"""ruff and mypy as CI runs them (.ci/run runs them before pytest), so the README's test command
checks them too; skipped where they are not installed (pip install -e '.[dev]' installs both)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> list[str]:
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[dev]')")
    return [sys.executable, "-m", name]


def test_ruff_finds_nothing():
    done = subprocess.run([*_tool("ruff"), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


@pytest.mark.slow
def test_mypy_finds_nothing_in_evo_and_training():
    done = subprocess.run(_tool("mypy"), cwd=ROOT, capture_output=True, text=True, timeout=1200)  # [tool.mypy] files
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "no issues found" in done.stdout
