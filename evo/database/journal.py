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
_COLUMNS = "iteration, slot, island, code, hash, parents, status, message, policy, answer"


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
    policy: str = ""  # the name of the policy that proposed it
    answer: int = 0  # its place in its policy reply (a set reply holds several programs; 0 starts a reply)


def _dump_evaluation(evaluation: Evaluation) -> tuple:
    scores = None if evaluation.scores is None else json.dumps([float(v) for v in evaluation.scores])
    failure = evaluation.failure
    return (scores, failure and failure.kind, failure and failure.message,
            json.dumps(dict(evaluation.extras)), float(evaluation.seconds), evaluation.output,
            evaluation.feedback, int(evaluation.stage))


_EVALUATION_COLUMNS = "scores, failure_kind, failure_message, extras, seconds, output, feedback, stage"


def _load_evaluation(row: tuple) -> Evaluation:
    scores, kind, message, extras, seconds, output, feedback, stage = row
    return Evaluation(
        scores=None if scores is None else np.asarray(json.loads(scores), dtype=np.float64),
        failure=None if kind is None else Failure(kind, message),
        extras=json.loads(extras), seconds=seconds, output=output, feedback=feedback, stage=stage,
    )


def outcome_counts(connection: sqlite3.Connection) -> dict[str, int]:
    """Candidates by outcome in a journal's tables: evaluated ok, failed, parse errors, duplicates, and
    pending (proposed in an iteration the run stopped before committing: evaluated or not, never stored)."""
    ok, failed = connection.execute(
        "SELECT COALESCE(SUM(failure_kind IS NULL), 0), COALESCE(SUM(failure_kind IS NOT NULL), 0) "
        "FROM evaluations").fetchone()
    by_status = dict(connection.execute("SELECT status, COUNT(*) FROM candidates GROUP BY status").fetchall())
    return {"ok": ok, "failed": failed, "parse": by_status.get(PARSE_ERROR, 0), "duplicate": by_status.get(DUPLICATE, 0),
            "pending": by_status.get(PENDING, 0)}


def parse_messages(connection: sqlite3.Connection) -> list[tuple[int, str]]:
    """(iteration, message) of every unparseable candidate in a journal's tables, oldest first."""
    return [tuple(row) for row in connection.execute(
        "SELECT iteration, message FROM candidates WHERE status = ? ORDER BY iteration, slot", (PARSE_ERROR,))]


def policy_counts(connection: sqlite3.Connection) -> list[tuple[str, str, int]]:
    """(policy name, status, candidates) in a journal's tables; policy '' where it predates them."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(candidates)")}
    policy = "policy" if "policy" in columns else "''"
    return [tuple(row) for row in connection.execute(
        f"SELECT {policy} AS p, status, COUNT(*) FROM candidates GROUP BY p, status ORDER BY p, status")]


def reply_counts(connection: sqlite3.Connection) -> dict[str, int]:
    """Policy replies (completions) by policy name: the candidates that start a reply."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(candidates)")}
    policy = "policy" if "policy" in columns else "''"
    start = "answer = 0" if "answer" in columns else "1"
    return dict(connection.execute(f"SELECT {policy} AS p, COUNT(*) FROM candidates WHERE {start} GROUP BY p"))


class CandidateJournal:
    """The candidates and evaluations tables of a run's store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add_candidates(self, candidates: Iterable[Candidate]) -> None:
        rows = [(c.iteration, c.slot, c.island, c.code, c.hash, json.dumps(list(c.parents)),
                 c.status, c.message, c.policy, c.answer) for c in candidates]
        with self.store.transaction():
            self.store.connection.executemany(f"INSERT OR REPLACE INTO candidates ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)", rows)

    def add_evaluations(self, evaluated: Iterable[tuple[Candidate, Evaluation]]) -> None:
        rows = [(c.iteration, c.slot, *_dump_evaluation(e)) for c, e in evaluated]
        with self.store.transaction():
            self.store.connection.executemany(
                f"INSERT OR REPLACE INTO evaluations (iteration, slot, {_EVALUATION_COLUMNS}) "
                "VALUES (?,?,?,?,?,?,?,?,?,?)", rows)

    def mark_inserted(self, iteration: int) -> None:
        """The iteration's pending candidates are programs now; in the transaction that inserts them."""
        with self.store.transaction():
            self.store.connection.execute("UPDATE candidates SET status = ? WHERE iteration = ? AND status = ?",
                                          (INSERTED, iteration, PENDING))

    def candidates(self, since: int = 0) -> list[Candidate]:
        rows = self.store.connection.execute(
            f"SELECT {_COLUMNS} FROM candidates WHERE iteration >= ? ORDER BY iteration, slot", (since,))
        return [Candidate(i, s, isl, code, h, tuple(json.loads(p)), st, msg, policy, answer)
                for i, s, isl, code, h, p, st, msg, policy, answer in rows]

    def policy_counts(self) -> list[tuple[str, str, int]]:
        """(policy name, status, candidates): what each policy proposed (evo/policy_mix.py)."""
        return policy_counts(self.store.connection)

    def reply_counts(self) -> dict[str, int]:
        """Policy replies by policy name (a reply holds one program, or a set of several)."""
        return reply_counts(self.store.connection)

    def next_iteration(self) -> int:
        """One past the last journaled iteration (0 when none): where the next group starts."""
        (last,) = self.store.connection.execute("SELECT MAX(iteration) FROM candidates").fetchone()
        return 0 if last is None else int(last) + 1

    def originals(self, keys: Iterable[str]) -> dict[str, Evaluation]:
        """For each duplicate key, the evaluation of the first program that had it: a journaled
        candidate's, else a stored program's (the initial programs are not journaled). A key
        found nowhere is left out."""
        found: dict[str, Evaluation] = {}
        connection = self.store.connection
        for key in dict.fromkeys(keys):
            row = connection.execute(
                f"SELECT {', '.join('e.' + c.strip() for c in _EVALUATION_COLUMNS.split(','))} FROM candidates c "
                "JOIN evaluations e ON e.iteration = c.iteration AND e.slot = c.slot "
                "WHERE c.hash = ? AND c.status IN (?, ?) ORDER BY c.iteration, c.slot LIMIT 1",
                (key, PENDING, INSERTED)).fetchone()
            if row is not None:
                found[key] = _load_evaluation(tuple(row))
                continue
            stored = connection.execute("SELECT scores, failure_kind, failure_message FROM programs WHERE norm_hash = ? "
                                        "AND origin = 'evaluated' ORDER BY id LIMIT 1", (key,)).fetchone()
            if stored is not None:
                scores, kind, message = stored
                found[key] = (Evaluation.failed(kind, message or "") if kind is not None
                              else Evaluation(np.frombuffer(scores, dtype=np.float64).copy()))
        return found

    def hashes(self) -> set[str]:
        rows = self.store.connection.execute("SELECT hash FROM candidates WHERE status != ?", (PARSE_ERROR,))
        return {h for (h,) in rows}

    def evaluations(self, since: int = 0) -> dict[tuple[int, int], Evaluation]:
        rows = self.store.connection.execute(
            f"SELECT iteration, slot, {_EVALUATION_COLUMNS} FROM evaluations WHERE iteration >= ?", (since,))
        return {(row[0], row[1]): _load_evaluation(tuple(row)[2:]) for row in rows}

    def counts(self) -> dict[str, int]:
        """Candidates by outcome: evaluated ok, failed, parse errors, duplicates, pending."""
        return outcome_counts(self.store.connection)

    def parse_messages(self) -> list[tuple[int, str]]:
        return parse_messages(self.store.connection)

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
                        names = ", ".join(row[1] for row in connection.execute(f"PRAGMA legacy.table_info({table})"))
                        connection.execute(f"INSERT OR IGNORE INTO {table} ({names}) SELECT {names} FROM legacy.{table}")
                    connection.execute("UPDATE candidates SET status = ? WHERE iteration < ? AND status = ?",
                                       (INSERTED, committed, PENDING))
            finally:
                connection.execute("DETACH DATABASE legacy")
        except sqlite3.DatabaseError as error:
            raise UserError(f"{legacy}: the separate run journal is unreadable ({error}); move it away to resume without it") from None
        for suffix in ("", "-wal", "-shm"):
            Path(f"{legacy}{suffix}").unlink(missing_ok=True)
        return True
