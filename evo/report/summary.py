"""What `evo show DIR` prints, as plain values read from a run directory: the run's summary
(the DESIGN.md shape) and one program's view.

    data = summary(directory)              # programs, failures, iterations, best, pareto, coverage, ...
    view = program_view(directory, 12)     # program #12: parents, lineage, scores or failure, code
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from evo.errors import UserError
from evo.report.data import check_run

LINEAGE_IDS = 20  # of a program's lineage, the latest ancestors listed by `evo show --program`


def summary(directory: Path) -> dict:
    """The DESIGN.md shape: programs, failures, iterations, best, pareto, coverage (+ counts)."""
    from evo import failures
    from evo.database import Database
    from evo.policy_mix import policy_table
    from evo.run_dir import LEGACY_JOURNAL_FILE, policy_names
    from evo.scores import real_values
    from evo.training_log import figures

    check_run(directory)
    with Database.open(directory, read_only=True) as db:
        stats = db.stats()
        objectives = db.config.objectives
        best = db.best()
        minimize = db.config.minimize
        pareto = failures.distinct_front(db.front(), objectives, minimize)
        has_features = bool(db.config.features)
        counts = db.journal.counts()
        proposed = db.journal.policy_counts()
        replies = db.journal.reply_counts()
        programs = dict(db.programs)
        messages = failures.common(programs.values())
        unparsed = failures.common_unparsed(db.journal.parse_messages())
    legacy = directory / LEGACY_JOURNAL_FILE
    if legacy.is_file():  # a run of the two-file layout, not resumed since: its journal, read-only
        counts, proposed, replies, unparsed = _legacy_counts(legacy, stats["iterations"])
    training = figures(directory)
    return {
        **({"training": training} if training is not None else {}),
        "programs": stats["programs"],  # evaluated and stored (copies aside): the run line's "evaluated"
        "failures": stats["failures"],
        "iterations": stats["iterations"],
        "best": None if best is None else {
            "id": best.id, "scalar": best.scalar,
            "scores": real_values(best.vector, objectives, minimize), "code": best.code},
        "pareto": pareto,
        "coverage": stats["coverage"] if has_features else None,
        "failure_messages": messages,
        "unparseable": counts["parse"],
        "unparseable_messages": unparsed,
        "duplicates": counts["duplicate"],
        "pending": counts.get("pending", 0),
        "policies": policy_table(proposed, programs, policy_names(directory), replies),
    }


def _legacy_counts(legacy: Path, committed: int) -> tuple:
    """(outcome counts, policy counts, reply counts, unparseable messages) of a two-file run's journal
    (whose candidates stay pending once inserted: pending are those past the `committed` iterations)."""
    from evo.failures import common_unparsed
    from evo.database.journal import PENDING, outcome_counts, parse_messages, policy_counts, reply_counts

    try:
        with closing(sqlite3.connect(f"file:{legacy}?mode=ro", uri=True)) as connection:
            (pending,) = connection.execute("SELECT COUNT(*) FROM candidates WHERE status = ? AND iteration >= ?",
                                            (PENDING, committed)).fetchone()
            return ({**outcome_counts(connection), "pending": pending}, policy_counts(connection),
                    reply_counts(connection), common_unparsed(parse_messages(connection)))
    except sqlite3.DatabaseError as error:
        raise UserError(f"{legacy}: the separate run journal is unreadable ({error})") from None


def program_view(directory: Path, program_id: int) -> dict:
    """Program `program_id` of the run: where it came from (parents, lineage by first parent,
    oldest first), its scores (real values) or its failure, and its code."""
    from evo.database import Database
    from evo.database.records import ancestry, original
    from evo.scores import real_values

    check_run(directory)
    with Database.open(directory, read_only=True) as db:
        programs, objectives, minimize = dict(db.programs), db.config.objectives, db.config.minimize
    p = programs.get(program_id)
    if p is None:
        held = f"its programs are #{min(programs)} to #{max(programs)}" if programs else "it holds no program"
        raise UserError(f"{directory}: no program #{program_id} in this run ({held}); see evo show {directory}")
    lineage = [a.id for a in ancestry(programs, original(programs, p.id))][::-1]
    return {"id": p.id, "iteration": p.iteration, "island": p.island, "policy": p.policy, "origin": p.origin,
            "source": p.source, "parents": list(p.parents), "lineage": lineage, "scalar": p.scalar,
            "scores": None if p.scores is None else real_values(p.scores, objectives, minimize),
            "failure": None if p.ok else {"kind": p.failure_kind, "message": p.failure_message},
            "feedback": p.feedback, "code": p.code}
