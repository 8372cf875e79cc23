"""Search-only comparison on a user's problem spec: every policy searches the spec with run
seeds 0 .. S-1, proposing the same number of PROGRAMS each (a reply of m programs counts m;
each policy asked the way it was trained), through the same loop as `evo run`; per run, the
best scalar so far and the hypervolume of the front found so far against programs proposed,
and whether the spec's target was reached."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from evo import metrics
from evo.scores import scalarize

MAX_HYPERVOLUME_OBJECTIVES = 4  # evo.metrics.hypervolume's exact sweep


@dataclass(frozen=True)
class SpecSearch:
    seeds: int = 3  # runs per policy (run seeds 0 .. seeds - 1, shared by every policy: paired)
    programs: int = 120  # programs proposed per run, the same for every policy (a reply of m programs counts m)


def iterations_for(programs: int, samples: int, m: int) -> int:
    """Iterations that propose at least `programs` programs at `samples` replies of `m` each."""
    return -(-programs // (samples * m))


VALID_EXTRA = "valid"  # a scorer's extra key saying whether a program that ran is a valid answer (the maze specs' 0 or 1)
SCORED_VALID = "scorer_valid_share"  # the row of the proposals the scorer called valid, where it says so


@dataclass(frozen=True)
class RunVectors:
    """The evaluated programs of one run: where each came among the run's proposals (1-based,
    in (iteration, slot) order; the initial program(s) at 1) and its score vector."""

    at: np.ndarray  # (n,) int
    vectors: np.ndarray  # (n, d)
    outcomes: tuple[float, float, float] = (np.nan, np.nan, np.nan)  # shares of the proposals: valid, failed, duplicate
    evaluated: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # places of the proposals the evaluator ran (distinct programs)
    # share of the proposals evaluated ok that the scorer called valid (its `valid` extra not 0); None: it reports none
    scored_valid: float | None = None


def run_one(spec_path: Path, overrides: Mapping, uri: str, policy, seed: int, programs: int, directory: Path,
            train: Callable | None = None, answers: int = 0, tokens: int | None = None) -> RunVectors:
    """One `evo run` of the spec with `policy` proposing `programs` programs (the spec's target
    kept), `answers` per reply (0: the policy's own), `tokens` a program (None: evo run's
    default); `train(config, loop)`: the policy that trains during the run and its learner
    (evo run --train)."""
    from evo import policies, run_dir
    from evo.loop import RunOptions

    spec = run_dir.check_spec(spec_path, dict(overrides))
    m = policies.answers_for(uri, answers or spec.search.answers)
    settings = {**overrides, "search.answers": m,
                "search.iterations": iterations_for(programs, spec.search.samples_per_prompt, m)}
    config = run_dir.new_config(spec_path, uri, seed, directory, settings, RunOptions(max_new_tokens=tokens), "process")
    learners = []
    if train is not None:
        policy, learner = train(config, run_dir.loop_config(config.spec(), config))
        learners.append(learner)
    run_dir.execute(config, policy, progress=False, observers=learners, resumable=False)  # evo compare owns it
    return run_vectors(directory)


def run_vectors(directory: Path) -> RunVectors:
    """A run's successful programs from its journal, by their place among the proposals."""
    from evo.database import Database
    from evo.policy_mix import is_initial

    with Database.open(directory, read_only=True) as db:
        d = len(db.config.objectives)
        initial = [np.asarray(p.scores, dtype=np.float64) for p in db.evaluated() if is_initial(p)]
        evaluations = db.journal.evaluations()
        ok = [(place, evaluations[(c.iteration, c.slot)]) for place, c in enumerate(db.journal.candidates(), 1)
              if (c.iteration, c.slot) in evaluations and evaluations[(c.iteration, c.slot)].ok]
        found = [(place, evaluation.scores) for place, evaluation in ok]
        counts = db.journal.counts()
        evaluated = np.array([place for place, c in enumerate(db.journal.candidates(), 1)
                              if (c.iteration, c.slot) in evaluations], dtype=np.int64)
    at = np.array([1] * len(initial) + [place for place, _ in found], dtype=np.int64)
    rows = initial + [np.asarray(v, dtype=np.float64) for _, v in found]
    total = max(1, sum(counts.values()))
    outcomes = (counts["ok"] / total, (counts["failed"] + counts["parse"]) / total, counts["duplicate"] / total)
    said = [evaluation.extras[VALID_EXTRA] for _, evaluation in ok if VALID_EXTRA in evaluation.extras]
    scored_valid = sum(1 for value in said if value != 0) / total if said else None
    return RunVectors(at, np.stack(rows) if rows else np.zeros((0, d)), outcomes, evaluated, scored_valid)


OUTCOMES = ("valid_share", "failed_share", "duplicate_share")  # of a run's proposals: evaluated ok; failed or unparseable; repeats


def reports_valid(runs: Iterable[RunVectors]) -> bool:
    """Whether the scorer reported its `valid` extra in any of these runs."""
    return any(run.scored_valid is not None for run in runs)


def outcome_columns(runs: list[RunVectors], scored: bool | None = None) -> dict[str, np.ndarray]:
    """Metric name -> one value per seed: the shares of the runs' proposals that were valid,
    failed (or did not parse) and duplicates (`evo compare --spec`'s valid / failed / duplicate rows);
    where the scorer reports a `valid` extra (a program it scores rather than fails, such as a
    maze route into a wall), also the share it called valid (`scored`: whether to give that row,
    the same for every policy of a comparison; None: where one of these runs saw the extra)."""
    shares = np.array([run.outcomes for run in runs], dtype=np.float64).reshape(len(runs), len(OUTCOMES))
    columns = {name: shares[:, j] for j, name in enumerate(OUTCOMES)}
    if reports_valid(runs) if scored is None else scored:
        columns[SCORED_VALID] = np.array([run.scored_valid or 0.0 for run in runs], dtype=np.float64)
    return columns


def so_far(run: RunVectors, value: Callable[[np.ndarray], np.ndarray], programs: int, before: float) -> np.ndarray:
    """(programs,) the largest `value` (of the found programs' (n, d) score rows) so far after
    each program proposed, `before` until the first success; programs past the budget do not count."""
    curve = np.full(programs, before)
    within = run.at <= programs
    if within.any():
        np.maximum.at(curve, run.at[within] - 1, value(run.vectors[within]))
    return np.maximum.accumulate(curve)


def best_curve(run: RunVectors, weights: np.ndarray, programs: int) -> np.ndarray:
    """(programs,) best scalar so far after each program proposed (-inf before the first success)."""
    return so_far(run, lambda rows: scalarize(rows, weights), programs, -np.inf)


def floor_curve(run: RunVectors, programs: int) -> np.ndarray:
    """(programs,) the best worst objective so far: the largest over the programs found of their
    smallest score (every objective at or above it), 0 before the first success."""
    return so_far(run, lambda rows: np.maximum(rows.min(axis=1), 0.0), programs, 0.0)


def hypervolume_curve(run: RunVectors, reference: np.ndarray, programs: int, points: int | None = None,
                      volume_of: Callable[[np.ndarray, np.ndarray], float] = metrics.hypervolume) -> np.ndarray:
    """(programs,) hypervolume above `reference` of everything found up to each program (computed
    at `points` evenly spaced budgets and held between them; None: at every new program), by
    `volume_of` (the exact sweep, or `metrics.hypervolume_estimate` beyond four objectives)."""
    curve = np.zeros(programs)
    marks = set(range(1, programs + 1)) if points is None else {round(programs * (i + 1) / points) for i in range(points)}
    volume, last = 0.0, 0
    for place in range(1, programs + 1):
        if place in marks and ((run.at > last) & (run.at <= place)).any():
            volume = volume_of(run.vectors[run.at <= place], reference)
            last = place
        curve[place - 1] = volume
    return curve


def reference_point(runs: list[RunVectors], d: int) -> np.ndarray:
    """One reference for every policy: below the origin and below the worst score any run found
    by a tenth of the pooled range (at least 0.1), so a front whose points score zero on some
    objective still has volume. Scores in [0, 1] get (-0.1, ..., -0.1)."""
    pooled = [run.vectors for run in runs if len(run.vectors)]
    if not pooled:
        return np.full(d, -0.1)
    stacked = np.concatenate(pooled)
    low = np.minimum(stacked.min(axis=0), 0.0)
    return low - 0.1 * np.maximum(stacked.max(axis=0) - low, 1.0)


def curves(runs: Mapping[str, list[RunVectors]], weights: np.ndarray, programs: int,
           points: int | None = None) -> tuple[dict, dict, np.ndarray | None]:
    """Per policy (seeds, programs) best-so-far and hypervolume curves (None for d > 4), and the reference."""
    d = len(weights)
    best = {name: np.stack([best_curve(r, weights, programs) for r in rs]) for name, rs in runs.items()}
    if d > MAX_HYPERVOLUME_OBJECTIVES:
        return best, {}, None
    reference = reference_point([r for rs in runs.values() for r in rs], d)
    volume = {name: np.stack([hypervolume_curve(r, reference, programs, points) for r in rs]) for name, rs in runs.items()}
    return best, volume, reference


def columns(best: np.ndarray, volume: np.ndarray | None, target: float | None) -> dict[str, np.ndarray]:
    """Metric name -> one value per seed (the paired unit of the comparison)."""
    finite = np.where(np.isfinite(best), best, np.nan)
    result: dict[str, np.ndarray] = {}
    if target is not None:
        result["success"] = (best[:, -1] >= target).astype(np.float64)
    result["final_best"] = finite[:, -1]
    result["mean_best_so_far"] = np.nanmean(finite, axis=1)
    if volume is not None:
        result["final_hypervolume"] = volume[:, -1]
        result["mean_hypervolume"] = volume.mean(axis=1)
    return result


def programs_to_solve(best: np.ndarray, target: float | None) -> float | None:
    """Median (over runs) of the programs proposed until the target; None when no run reached it."""
    if target is None:
        return None
    solved = best >= target
    first = np.where(solved.any(axis=1), solved.argmax(axis=1) + 1, np.nan)
    return None if np.isnan(first).all() else float(np.nanmedian(first))
