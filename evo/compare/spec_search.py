"""Search-only comparison on a user's problem spec: every policy searches the spec with run
seeds 0 .. S-1 for C policy calls each, through the same loop as `evo run`; per run, the
best scalar so far and the hypervolume of the front found so far against calls, and whether
the spec's target was reached."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evo import metrics
from evo.scores import scalarize

MAX_HYPERVOLUME_OBJECTIVES = 4  # evo.metrics.hypervolume's exact sweep


@dataclass(frozen=True)
class SpecSearch:
    seeds: int = 3  # runs per policy (run seeds 0 .. seeds - 1, shared by every policy: paired)
    calls: int = 30  # policy calls (iterations) per run


@dataclass(frozen=True)
class RunVectors:
    """The evaluated programs of one run: the call each arrived at (1-based) and its scores."""

    calls: np.ndarray  # (n,) int
    vectors: np.ndarray  # (n, d)


def run_one(spec_path: Path, overrides: Mapping, uri: str, policy, seed: int, calls: int, directory: Path,
            train: Callable | None = None) -> RunVectors:
    """One `evo run` of the spec with `policy` for `calls` calls (the spec's target kept);
    `train(config, policy)`: the policy that trains itself during the run (evo run --train)."""
    from evo import run_dir

    config = run_dir.new_config(spec_path, uri, seed, directory, {**overrides, "search.iterations": calls}, {}, "process")
    run_dir.execute(config, policy if train is None else train(config, policy), progress=False)
    return run_vectors(directory, calls)


def run_vectors(directory: Path, calls: int) -> RunVectors:
    """A run's successful programs; the initial program(s) count at call 1."""
    from evo.database import Database

    with Database.open(directory) as db:
        programs = db.evaluated()
        d = len(db.config.objectives)
    found = np.array([min(max(p.iteration, 1), calls) for p in programs], dtype=np.int64)
    vectors = np.stack([np.asarray(p.scores, dtype=np.float64) for p in programs]) if programs else np.zeros((0, d))
    return RunVectors(found, vectors)


def best_curve(run: RunVectors, weights: np.ndarray, calls: int) -> np.ndarray:
    """(calls,) best scalar so far after each call (-inf before the first success)."""
    curve = np.full(calls, -np.inf)
    np.maximum.at(curve, run.calls - 1, scalarize(run.vectors, weights) if len(run.vectors) else np.zeros(0))
    return np.maximum.accumulate(curve)


def hypervolume_curve(run: RunVectors, reference: np.ndarray, calls: int) -> np.ndarray:
    """(calls,) hypervolume above `reference` of everything found up to each call."""
    curve = np.zeros(calls)
    volume = 0.0
    for call in range(1, calls + 1):
        if (run.calls == call).any():
            volume = metrics.hypervolume(run.vectors[run.calls <= call], reference)
        curve[call - 1] = volume
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


def curves(runs: Mapping[str, list[RunVectors]], weights: np.ndarray, calls: int) -> tuple[dict, dict, np.ndarray | None]:
    """Per policy (seeds, calls) best-so-far and hypervolume curves (None for d > 4), and the reference."""
    d = len(weights)
    best = {name: np.stack([best_curve(r, weights, calls) for r in rs]) for name, rs in runs.items()}
    if d > MAX_HYPERVOLUME_OBJECTIVES:
        return best, {}, None
    reference = reference_point([r for rs in runs.values() for r in rs], d)
    volume = {name: np.stack([hypervolume_curve(r, reference, calls) for r in rs]) for name, rs in runs.items()}
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


def calls_to_solve(best: np.ndarray, target: float | None) -> float | None:
    """Median (over seeds) of the first call reaching the target; None when no run reached it."""
    if target is None:
        return None
    solved = best >= target
    first = np.where(solved.any(axis=1), solved.argmax(axis=1) + 1, np.nan)
    return None if np.isnan(first).all() else float(np.nanmedian(first))
