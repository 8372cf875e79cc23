"""The run directory's own files are the user's alone (docs/sandbox.md, "Files the project reads
back"): a candidate under another uid cannot read the journal, run.json or the best program,
whatever the user's umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from evo.private import private_dir
from tests.test_run_cli import PROGRAM, SCORER, SPEC, evo


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask():
    old = os.umask(0o022)  # the usual: files 0644, directories 0755
    yield
    os.umask(old)


@pytest.mark.parametrize("existing", [False, True])
def test_a_run_directory_and_its_files_are_private(tmp_path, open_umask, existing):
    (tmp_path / "initial.py").write_text(PROGRAM)
    (tmp_path / "score.py").write_text("DELAY = 0.0\n" + SCORER)
    (tmp_path / "problem.toml").write_text(SPEC)
    out = tmp_path / "runs" / "a"
    if existing:
        out.mkdir(parents=True)
    result = evo("run", str(tmp_path / "problem.toml"), "--policy", "mutate:", "--iterations", "2", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert mode(out) == (0o755 if existing else 0o700)  # a directory of the user's keeps its mode
    files = [out / name for name in ("run.json", "programs.sqlite", "best.py")]
    files += [p for p in out.glob("programs.sqlite-*")]
    assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}


def test_private_dir_makes_only_what_it_creates_private(tmp_path, open_umask):
    assert mode(private_dir(tmp_path / "x" / "y")) == 0o700 and mode(tmp_path / "x") == 0o755
    (tmp_path / "z").mkdir()
    assert mode(private_dir(tmp_path / "z")) == 0o755
