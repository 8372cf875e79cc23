"""What `evo report` shows, gathered from a run's stored records: pure functions over the
programs (evo/database/records.py), the journal's counts and the run's configuration.

    records = RunRecords.read(directory)        # the one I/O step
    page = gather(records, x="fa", y="fb")      # plain values: curves, front, grid, lineage, tables
"""

from __future__ import annotations

import difflib
from collections import Counter
from itertools import combinations
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evo import failures as failure_messages
from evo.database.archive import Grid
from evo.database.config import FeatureConfig
from evo.metrics import on_front
from evo.database.records import Program, ancestry
from evo.errors import UserError
from evo.policy_mix import policy_table
from evo.scores import oriented, real_values

DIFF_LINES = 400  # the most lines of one lineage step's diff kept in the page
LINEAGE_SHOWN = 40  # the latest lineage steps shown with their diffs; the earlier ones (but the first) summarized


def check_run(directory: Path) -> None:
    """A UserError when `directory` holds no run's database."""
    from evo.database import database_file

    if not database_file(directory).is_file():
        raise UserError(f"{directory}: no run here (no {database_file(directory).name}); start one with evo run SPEC --out {directory}")


@dataclass(frozen=True)
class RunRecords:
    """Everything the report reads from a run directory."""

    name: str
    objectives: tuple[str, ...]
    features: tuple[FeatureConfig, ...]
    programs: Mapping[int, Program]
    statuses: tuple[tuple[str, str, int], ...]  # (policy, candidate status, count) from the journal
    iterations: int
    policies: tuple[str, ...] = ()  # the run's policy names (run.json)
    minimize: tuple[str, ...] = ()  # objectives stored negated: shown with their real values
    training: dict | None = None  # evo.training_log.figures: the run trained its policy (evo run --train)
    replies: Mapping[str, int] | None = None  # policy completions by policy name (journal.reply_counts)
    unparsed: tuple[tuple[int, str], ...] = ()  # (iteration, message) of each unparseable proposal (journal.parse_messages)

    @classmethod
    def read(cls, directory: Path) -> "RunRecords":
        from evo.database import Database
        from evo.run_dir import policy_names
        from evo.training_log import figures

        check_run(directory)
        with Database.open(directory, read_only=True) as db:
            return cls(Path(directory).name, db.config.objectives, db.config.features, dict(db.programs),
                       tuple(db.journal.policy_counts()), db.iteration, policy_names(directory), db.config.minimize,
                       figures(directory), db.journal.reply_counts(), tuple(db.journal.parse_messages()))


def evaluated(records: RunRecords) -> list[Program]:
    """The evaluated programs (no copies), in the order they were stored."""
    return [p for _, p in sorted(records.programs.items()) if not p.is_copy]


def curves(programs: list[Program], objectives: tuple[str, ...], minimize: tuple[str, ...] = (),
           end: int = 0) -> dict:
    """Best-so-far per iteration, up to the run's last iteration `end` (or the last program's):
    of the scalar and of each objective on its own (real values: a minimized objective's
    curve goes down); `first`: the scalar of the first program evaluated, where the search started."""
    ok = [p for p in programs if p.ok]
    if not ok:
        return {"iterations": [], "scalar": [], "objectives": {name: [] for name in objectives}, "first": None}
    last = max(end, max(p.iteration for p in ok))
    scalar = np.full(last + 1, -np.inf)
    scores = np.full((last + 1, len(objectives)), -np.inf)
    for p in ok:
        scalar[p.iteration] = max(scalar[p.iteration], p.value)
        scores[p.iteration] = np.maximum(scores[p.iteration], p.vector)
    scalar, scores = np.maximum.accumulate(scalar), np.maximum.accumulate(scores, axis=0)
    start = int(np.argmax(np.isfinite(scalar)))
    scores = oriented(scores, objectives, minimize)
    return {"iterations": list(range(start, last + 1)), "scalar": scalar[start:].tolist(),
            "objectives": {name: scores[start:, j].tolist() for j, name in enumerate(objectives)}, "first": ok[0].value}


PAIRED = 4  # up to this many objectives the front is drawn for every pair; beyond, the first pair


def front(programs: list[Program], objectives: tuple[str, ...], x: str | None = None, y: str | None = None,
          minimize: tuple[str, ...] = ()) -> dict:
    """Every successful program's score vector (real values) and whether it is on the front over
    ALL objectives (`evo.metrics.on_front`: the front `evo show` prints); `pairs`: the objectives
    drawn against each other, (x, y) when given, else every pair up to PAIRED objectives, else
    the first two (the page adds parallel coordinates of every objective)."""
    for name in (x, y):
        if name is not None and name not in objectives:
            raise UserError(f"--x/--y {name!r}: not an objective of this run; its objectives are {list(objectives)}")
    ok = [p for p in programs if p.ok]
    vectors = np.array([p.vector for p in ok], dtype=np.float64).reshape(-1, len(objectives))
    mask = on_front(vectors)
    if x is not None or y is not None:
        pairs = [(x or objectives[0], y or objectives[min(1, len(objectives) - 1)])]
    elif len(objectives) <= PAIRED:
        pairs = list(combinations(objectives, 2)) or [(objectives[0], objectives[0])]
    else:
        pairs = [(objectives[0], objectives[1])]
    return {"objectives": list(objectives), "minimize": list(minimize), "pairs": [list(pair) for pair in pairs],
            "points": oriented(vectors, objectives, minimize).tolist(), "front": mask.tolist(), "ids": [p.id for p in ok],
            "distinct": len({row.tobytes() for row in vectors[mask] + 0.0})}


def grid(programs: list[Program], features: tuple[FeatureConfig, ...]) -> dict | None:
    """The MAP-Elites archive over the first two features: the best scalar per cell, and the
    share of the whole grid's cells filled (None: no features)."""
    if not features:
        return None
    shown = features[:2]
    cells = Grid(features)
    shape = tuple(f.bins for f in features)
    values = np.full((shown[0].bins, shown[1].bins if len(shown) > 1 else 1), np.nan)
    filled = set()
    for p in programs:
        if p.ok:
            cell = cells.cell(p.features)
            filled.add(cell)
            index = np.unravel_index(cell, shape)
            at = (index[0], index[1] if len(shown) > 1 else 0)
            values[at] = np.fmax(values[at], p.value)
    return {"features": [{"name": f.name, "range": list(f.range), "bins": f.bins} for f in shown],
            "values": [[None if np.isnan(v) else float(v) for v in row] for row in values],
            "coverage": len(filled) / cells.cells}


def lineage(programs: Mapping[int, Program], best: Program | None, shown: int = LINEAGE_SHOWN) -> list[dict]:
    """The best program's ancestors by their first parent, oldest first: the first with its code,
    the last `shown` each with the diff from its parent; the steps between are summarized by
    `skipped` (linear in the lineage's length, a bounded page whatever it is)."""
    chain = ancestry(programs, best)[::-1]
    kept = range(len(chain)) if len(chain) <= shown + 1 else [0, *range(len(chain) - shown, len(chain))]
    steps = []
    for before, index in zip([None, *kept], kept):
        child = chain[index]
        parent = chain[index - 1] if index else None
        diff = [] if parent is None else list(difflib.unified_diff(
            parent.code.splitlines(), child.code.splitlines(), f"#{parent.id}", f"#{child.id}", lineterm=""))
        step = {"id": child.id, "iteration": child.iteration, "scalar": child.scalar, "policy": child.policy,
                "parent": None if parent is None else parent.id, "code": child.code if parent is None else "",
                "diff": diff[:DIFF_LINES], "cut": max(0, len(diff) - DIFF_LINES), "skipped": None}
        if before is not None and index - before > 1:
            between = chain[before + 1:index]
            step["skipped"] = {"steps": len(between), "first": between[0].id, "last": between[-1].id,
                               "iterations": [between[0].iteration, between[-1].iteration],
                               "scalar": [between[0].scalar, between[-1].scalar]}
        steps.append(step)
    return steps


def failures(programs: list[Program], statuses: tuple[tuple[str, str, int], ...]) -> dict[str, int]:
    """Failed evaluations by kind, and the candidates never stored as programs (unparseable,
    duplicates, and pending: proposed in an iteration the run stopped before committing)."""
    kinds = Counter(p.failure_kind or "" for p in programs if not p.ok)
    by_status: Counter[str] = Counter()
    for _, status, count in statuses:
        by_status[status] += count
    kinds.update({"unparseable": by_status["parse"], "duplicate": by_status["duplicate"], "pending": by_status["pending"]})
    return {kind: n for kind, n in sorted(kinds.items(), key=lambda item: (-item[1], item[0])) if n}


def gather(records: RunRecords, x: str | None = None, y: str | None = None) -> dict:
    """Everything the page shows, as plain values; `x`, `y`: the one pair of objectives to draw the
    front over (default: every pair, `front`)."""
    programs = evaluated(records)
    objectives = records.objectives
    ok = [p for p in programs if p.ok]
    best = max(ok, key=lambda p: (p.value, -p.id)) if ok else None
    return {
        "name": records.name, "iterations": records.iterations, "objectives": list(objectives),
        "programs": len(programs), "failed": sum(not p.ok for p in programs),
        "best": None if best is None else {"id": best.id, "scalar": best.scalar,
                                           "scores": real_values(best.vector, objectives, records.minimize)},
        "minimize": list(records.minimize),
        "curves": curves(programs, objectives, records.minimize, end=records.iterations - 1),
        "front": front(programs, objectives, x, y, records.minimize),
        "grid": grid(programs, records.features),
        "lineage": lineage(records.programs, best),
        "policies": policy_table(records.statuses, records.programs, records.policies, records.replies),
        "failures": failures(programs, records.statuses),
        "why": failure_messages.common(programs),
        "why_unparsed": failure_messages.common_unparsed(records.unparsed),
        "training": records.training,
    }
