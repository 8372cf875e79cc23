"""The run journal: a small SQLite file in the run directory that makes `evo run` resumable.

It records, durably and before they count, every generated candidate (with its iteration
and slot), every evaluation result, and which iterations were inserted into the program
database. A run killed at any moment resumes from it: generated candidates are not asked
for again, evaluated ones are not evaluated again, and iterations are committed in order.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evo.scores import Evaluation, Failure

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS candidates (
    iteration INTEGER NOT NULL, slot INTEGER NOT NULL, island INTEGER NOT NULL,
    code TEXT NOT NULL, hash TEXT NOT NULL, parents TEXT NOT NULL,
    status TEXT NOT NULL, message TEXT NOT NULL,
    PRIMARY KEY (iteration, slot));
CREATE TABLE IF NOT EXISTS evaluations (
    iteration INTEGER NOT NULL, slot INTEGER NOT NULL,
    scores TEXT, failure_kind TEXT, failure_message TEXT,
    extras TEXT NOT NULL, seconds REAL NOT NULL, output TEXT NOT NULL,
    PRIMARY KEY (iteration, slot));
CREATE TABLE IF NOT EXISTS commits (iteration INTEGER PRIMARY KEY);
"""

PENDING, PARSE_ERROR, DUPLICATE = "pending", "parse", "duplicate"


@dataclass(frozen=True)
class Candidate:
    """One policy sample turned into a program (or the reason it was not)."""

    iteration: int
    slot: int
    island: int
    code: str
    hash: str
    parents: tuple = ()
    status: str = PENDING  # pending (to evaluate) | parse | duplicate
    message: str = ""


def _dump_evaluation(evaluation: Evaluation) -> tuple:
    scores = None if evaluation.scores is None else json.dumps([float(v) for v in evaluation.scores])
    failure = evaluation.failure
    return (scores, failure and failure.kind, failure and failure.message,
            json.dumps(dict(evaluation.extras)), float(evaluation.seconds), evaluation.output)


def _load_evaluation(row: tuple) -> Evaluation:
    scores, kind, message, extras, seconds, output = row
    return Evaluation(
        scores=None if scores is None else np.asarray(json.loads(scores), dtype=np.float64),
        failure=None if kind is None else Failure(kind, message),
        extras=json.loads(extras), seconds=seconds, output=output,
    )


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # durable across process kills
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def set_meta(self, key: str, value: object) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def meta(self, key: str, default: object = None) -> object:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def add_candidates(self, candidates: Iterable[Candidate]) -> None:
        rows = [(c.iteration, c.slot, c.island, c.code, c.hash, json.dumps(list(c.parents)),
                 c.status, c.message) for c in candidates]
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR REPLACE INTO candidates VALUES (?,?,?,?,?,?,?,?)", rows)

    def add_evaluation(self, iteration: int, slot: int, evaluation: Evaluation) -> None:
        self._db.execute("INSERT OR REPLACE INTO evaluations VALUES (?,?,?,?,?,?,?,?)",
                         (iteration, slot, *_dump_evaluation(evaluation)))

    def mark_committed(self, iterations: Iterable[int]) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR IGNORE INTO commits VALUES (?)", [(i,) for i in iterations])

    def committed(self) -> int:
        """How many iterations are committed (they are committed in order, from 0)."""
        return self._db.execute("SELECT COUNT(*) FROM commits").fetchone()[0]

    def candidates(self, since: int = 0) -> list[Candidate]:
        rows = self._db.execute(
            "SELECT * FROM candidates WHERE iteration >= ? ORDER BY iteration, slot", (since,))
        return [Candidate(i, s, isl, code, h, tuple(json.loads(p)), st, msg)
                for i, s, isl, code, h, p, st, msg in rows]

    def hashes(self) -> set[str]:
        return {h for (h,) in self._db.execute("SELECT hash FROM candidates WHERE status != ?", (PARSE_ERROR,))}

    def evaluations(self, since: int = 0) -> dict[tuple[int, int], Evaluation]:
        rows = self._db.execute(
            "SELECT iteration, slot, scores, failure_kind, failure_message, extras, seconds, output "
            "FROM evaluations WHERE iteration >= ?", (since,))
        return {(row[0], row[1]): _load_evaluation(row[2:]) for row in rows}

    def counts(self) -> dict[str, int]:
        """Candidates by outcome: evaluated ok, failed, parse errors, duplicates."""
        ok, failed = self._db.execute(
            "SELECT COALESCE(SUM(failure_kind IS NULL), 0), COALESCE(SUM(failure_kind IS NOT NULL), 0) "
            "FROM evaluations").fetchone()
        by_status = dict(self._db.execute("SELECT status, COUNT(*) FROM candidates GROUP BY status").fetchall())
        return {"ok": ok, "failed": failed, "parse": by_status.get(PARSE_ERROR, 0),
                "duplicate": by_status.get(DUPLICATE, 0)}
