"""The loop's journal, in the run's one SQLite file: every generated candidate (with its
iteration, slot and status) and every evaluation result, durable before they count.

A run killed at any moment resumes from it: generated candidates are not asked for again,
evaluated ones are not evaluated again. The iteration counter of the program database says
which iterations were inserted (they are inserted in order, in one transaction with it).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evo.database.store import Store
from evo.errors import UserError
from evo.scores import Evaluation, Failure

PENDING, INSERTED, PARSE_ERROR, DUPLICATE = "pending", "inserted", "parse", "duplicate"


@dataclass(frozen=True)
class Candidate:
    """One policy sample turned into a program (or the reason it was not)."""

    iteration: int
    slot: int
    island: int
    code: str
    hash: str
    parents: tuple = ()  # ids of the programs shown as parents
    status: str = PENDING  # pending (to evaluate and insert) | inserted (a program now) | parse | duplicate
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


def outcome_counts(connection: sqlite3.Connection) -> dict[str, int]:
    """Candidates by outcome in a journal's tables: evaluated ok, failed, parse errors, duplicates."""
    ok, failed = connection.execute(
        "SELECT COALESCE(SUM(failure_kind IS NULL), 0), COALESCE(SUM(failure_kind IS NOT NULL), 0) "
        "FROM evaluations").fetchone()
    by_status = dict(connection.execute("SELECT status, COUNT(*) FROM candidates GROUP BY status").fetchall())
    return {"ok": ok, "failed": failed, "parse": by_status.get(PARSE_ERROR, 0), "duplicate": by_status.get(DUPLICATE, 0)}


class CandidateJournal:
    """The candidates and evaluations tables of a run's store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add_candidates(self, candidates: Iterable[Candidate]) -> None:
        rows = [(c.iteration, c.slot, c.island, c.code, c.hash, json.dumps(list(c.parents)),
                 c.status, c.message) for c in candidates]
        with self.store.transaction():
            self.store.connection.executemany("INSERT OR REPLACE INTO candidates VALUES (?,?,?,?,?,?,?,?)", rows)

    def add_evaluations(self, evaluated: Iterable[tuple[Candidate, Evaluation]]) -> None:
        rows = [(c.iteration, c.slot, *_dump_evaluation(e)) for c, e in evaluated]
        with self.store.transaction():
            self.store.connection.executemany("INSERT OR REPLACE INTO evaluations VALUES (?,?,?,?,?,?,?,?)", rows)

    def mark_inserted(self, iteration: int) -> None:
        """The iteration's pending candidates are programs now; in the transaction that inserts them."""
        with self.store.transaction():
            self.store.connection.execute("UPDATE candidates SET status = ? WHERE iteration = ? AND status = ?",
                                          (INSERTED, iteration, PENDING))

    def candidates(self, since: int = 0) -> list[Candidate]:
        rows = self.store.connection.execute(
            "SELECT * FROM candidates WHERE iteration >= ? ORDER BY iteration, slot", (since,))
        return [Candidate(i, s, isl, code, h, tuple(json.loads(p)), st, msg)
                for i, s, isl, code, h, p, st, msg in rows]

    def hashes(self) -> set[str]:
        rows = self.store.connection.execute("SELECT hash FROM candidates WHERE status != ?", (PARSE_ERROR,))
        return {h for (h,) in rows}

    def evaluations(self, since: int = 0) -> dict[tuple[int, int], Evaluation]:
        rows = self.store.connection.execute(
            "SELECT iteration, slot, scores, failure_kind, failure_message, extras, seconds, output "
            "FROM evaluations WHERE iteration >= ?", (since,))
        return {(row[0], row[1]): _load_evaluation(tuple(row)[2:]) for row in rows}

    def counts(self) -> dict[str, int]:
        """Candidates by outcome: evaluated ok, failed, parse errors, duplicates."""
        return outcome_counts(self.store.connection)

    def adopt(self, legacy: Path, committed: int) -> bool:
        """Move a run's old `journal.sqlite` (the layout before one file per run) into this
        store, in one transaction, then delete it; False when there is none. The candidates of
        the `committed` iterations, pending in that layout, are marked inserted."""
        if not legacy.is_file():
            return False
        connection = self.store.connection
        try:
            connection.execute("ATTACH DATABASE ? AS legacy", (str(legacy),))
            try:
                with self.store.transaction():
                    for table in ("candidates", "evaluations"):
                        connection.execute(f"INSERT OR IGNORE INTO {table} SELECT * FROM legacy.{table}")
                    connection.execute("UPDATE candidates SET status = ? WHERE iteration < ? AND status = ?",
                                       (INSERTED, committed, PENDING))
            finally:
                connection.execute("DETACH DATABASE legacy")
        except sqlite3.DatabaseError as error:
            raise UserError(f"{legacy}: the old run journal is unreadable ({error}); move it away to resume without it") from None
        for suffix in ("", "-wal", "-shm"):
            Path(f"{legacy}{suffix}").unlink(missing_ok=True)
        return True
