"""A careless user against `evo run` / `evo show`, through the real console script: every
mistake is one line (exit 2 usage, 1 work failed), never a traceback, and a refused
`--resume` changes no file."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.test_run_cli import SCRIPT, evo, problem  # noqa: F401  (problem: a fixture)


def one_line(result: subprocess.CompletedProcess, code: int, needle: str) -> None:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert needle in result.stderr, result.stderr


def finished_run(spec: Path, out: Path, *more: str) -> Path:
    result = evo("run", str(spec), "--policy", "mutate:", "--iterations", "3", "--out", str(out), "--quiet", *more)
    assert result.returncode == 0, result.stderr
    return out


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file() and p.name != "run.lock"}


def test_out_under_a_file(problem, tmp_path):
    (tmp_path / "plain").write_text("x")
    one_line(evo("run", str(problem), "--policy", "mutate:", "--out", str(tmp_path / "plain" / "run")), 2,
             "cannot create the run directory")


def read_only(directory: Path, *args: str) -> subprocess.CompletedProcess:
    """`evo ARGS` with `directory` read-only: by its mode, or for root by a read-only bind mount."""
    if os.geteuid() != 0:
        directory.chmod(0o555)
        return evo(*args)
    if shutil.which("unshare") is None:
        pytest.skip("root without unshare: no way to make a directory read-only")
    command = " ".join(f"'{a}'" for a in (SCRIPT, *args))
    result = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                             f"mount --bind -o ro '{directory}' '{directory}' && exec {command}"],
                            capture_output=True, text=True, timeout=120)
    if "mount" in result.stderr and "evo" not in result.stderr:
        pytest.skip(f"cannot bind-mount read-only here: {result.stderr.strip()}")
    return result


@pytest.mark.parametrize("inside", [True, False])
def test_out_on_a_read_only_directory(problem, tmp_path, inside):
    locked = tmp_path / "locked"
    locked.mkdir()
    out = locked / "run" if inside else locked
    result = read_only(locked, "run", str(problem), "--policy", "mutate:", "--out", str(out), "--quiet")
    one_line(result, 2, "pick another --out")
    locked.chmod(0o755)
    assert list(locked.iterdir()) == []


def test_a_bad_topology_flag(problem, tmp_path):
    one_line(evo("run", str(problem), "--policy", "mutate:", "--topology", "[bad", "--out", str(tmp_path / "r")),
             2, "--topology")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "config"])
def test_a_corrupt_program_database(problem, tmp_path, damage):
    out = finished_run(problem, tmp_path / "run")
    file = out / "programs.sqlite"
    if damage == "garbage":
        file.write_bytes(b"this is not sqlite" * 100)
    elif damage == "truncated":
        file.write_bytes(file.read_bytes()[:1500])
    else:
        db = sqlite3.connect(file)
        db.execute("UPDATE meta SET value = '{\"objectives\": 3}' WHERE key = 'config'")
        db.commit()
        db.close()
    before = files(out)
    one_line(evo("run", "--resume", str(out)), 2, "programs.sqlite")
    one_line(evo("show", str(out)), 2, "programs.sqlite")
    assert files(out) == before


def test_a_corrupt_journal_of_the_old_layout(problem, tmp_path):
    out = finished_run(problem, tmp_path / "run")
    (out / "journal.sqlite").write_bytes(b"\x00garbage" * 300)
    before = files(out)
    one_line(evo("run", "--resume", str(out), "--iterations", "5"), 2, "journal.sqlite")
    assert files(out) == before


@pytest.mark.parametrize("text", ["{}", "[]", '{"spec_path": 3}', "not json"])
def test_a_broken_run_file(problem, tmp_path, text):
    out = finished_run(problem, tmp_path / "run")
    (out / "run.json").write_text(text)
    one_line(evo("run", "--resume", str(out)), 2, "run.json")


def test_a_refused_resume_changes_no_file(problem, tmp_path):
    out = finished_run(problem, tmp_path / "run")
    before = files(out)
    one_line(evo("run", "--resume", str(out), "--islands", "8"), 2, "other objectives, islands, features or minimize")
    assert files(out) == before
    again = evo("run", "--resume", str(out), "--iterations", "5", "--quiet")  # not refused forever
    assert again.returncode == 0 and "5 iterations" in again.stdout, again.stderr
