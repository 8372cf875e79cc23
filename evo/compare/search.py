"""The search half of a comparison: evolutionary search with each policy on a suite of
hard instances over several seeds; success rate and best-so-far against policy calls."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evo.policies.base import Policy
from tasks.base import Instance, Task


@dataclass(frozen=True)
class Search:
    instances: int = 8  # hard held-out instances (0: skip the search)
    seeds: int = 2  # search runs per instance (run seeds 0 .. seeds - 1)
    calls: int = 30  # policy calls (iterations) per run
    instance_seed: int = 777  # seed of the test-split instances the hard ones are picked from


def best_so_far(directory: Path, calls: int, scale: float) -> np.ndarray:
    """Best scalar (as a fraction of `scale`) after each of `calls` iterations."""
    from evo.database import Database

    curve = np.zeros(calls)
    with Database.open(directory) as db:
        for program in db.evaluated():
            index = min(max(program.iteration, 1), calls) - 1  # the initial program counts at call 1
            curve[index] = max(curve[index], program.scalar / scale)
    return np.maximum.accumulate(curve)


def is_hard(task: Task, instance: Instance, directory: Path) -> bool:
    """Whether the instance's initial program falls short of its optimum (else search is moot)."""
    from evo import spec as specs
    from evo.sandbox.pool import Sandbox
    from evo.scores import scalarize

    problem = specs.load(task.problem_spec(instance, directory))
    with Sandbox.from_spec(problem) as sandbox:
        evaluation = sandbox.evaluate(problem.problem.program.read_text())
    if not evaluation.ok:
        return True
    return float(scalarize(evaluation.scores, problem.problem.weights)) < task.oracle_best(instance) - 1e-9


def hard_instances(task: Task, count: int, seed: int, directory: Path, scan: int = 20) -> list[Instance]:
    """The first `count` held-out instances (test split, `seed`) whose initial program is not optimal."""
    chosen: list[Instance] = []
    for instance in task.instances("test", count * scan, seed=seed):
        if len(chosen) == count:
            break
        if is_hard(task, instance, directory / f"check-{instance.index}"):
            chosen.append(instance)
    return chosen


def run_one(task: Task, instance: Instance, uri: str, policy: Policy, seed: int, calls: int, directory: Path) -> np.ndarray:
    """One evolutionary run on one instance; its best-so-far curve as a fraction of the optimum."""
    from evo import run_dir

    optimum = task.oracle_best(instance)
    spec_path = task.problem_spec(instance, directory / "problem")
    overrides = {"search.iterations": calls, "search.target": optimum}
    config = run_dir.new_config(spec_path, uri, seed, directory / "run", overrides, {}, "process")
    run_dir.execute(config, policy, progress=False)
    return best_so_far(directory / "run", calls, optimum)


def curves(task: Task, uri: str, policy: Policy, search: Search, out: Path, progress=lambda: None) -> np.ndarray:
    """(instances * seeds, calls) best-so-far curves on hard held-out instances."""
    instances = hard_instances(task, search.instances, search.instance_seed, out / "instances")
    rows = []
    for instance in instances:
        for seed in range(search.seeds):
            rows.append(run_one(task, instance, uri, policy, seed, search.calls, out / f"i{instance.index}-s{seed}"))
            progress()
    return np.array(rows).reshape(len(rows), search.calls)


def summary(curves_by_policy: dict[str, np.ndarray]) -> dict[str, dict]:
    """Success rate (reached the optimum) and final / area-under-curve best-so-far per policy."""
    result = {}
    for name, curve in curves_by_policy.items():
        solved = curve >= 1.0 - 1e-9
        first = np.where(solved.any(axis=1), solved.argmax(axis=1) + 1, np.nan)
        result[name] = {
            "runs": int(len(curve)),
            "success_rate": float(solved[:, -1].mean()),
            "final_best": float(curve[:, -1].mean()),
            "mean_best_so_far": float(curve.mean()),
            "median_calls_to_solve": None if np.isnan(first).all() else float(np.nanmedian(first)),
        }
    return result
