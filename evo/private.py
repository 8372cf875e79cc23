"""The project's own files in a run directory are the user's alone: a candidate running under
another uid (docs/sandbox.md) must not read the journal (every program and score), run.json or
a task's spec and scorer. A directory the project creates is 0700; the files it writes there
are 0600 also when the directory was the user's already.

    directory = private_dir(Path("runs/x"))
    write_private(directory / "run.json", text)
"""

from __future__ import annotations

import os
from pathlib import Path

DIRECTORY_MODE, FILE_MODE = 0o700, 0o600


def private_dir(path: Path) -> Path:
    """`path`, created with its missing parents; made 0700 when this call created it (a
    directory that existed keeps its mode: the files written into it are private instead)."""
    path = Path(path)
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(DIRECTORY_MODE)
    return path


def private_file(path: Path) -> Path:
    """`path`, created empty when absent; 0600 in either case (SQLite gives its -wal and -shm
    files the mode of the database file)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE))
    os.chmod(path, FILE_MODE)
    return Path(path)


def write_private(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` as a 0600 file."""
    private_file(path).write_text(text, encoding="utf-8")
