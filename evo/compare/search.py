"""The search half of a comparison on a task family: evolutionary search with each policy on
a suite of hard held-out instances over several run seeds.

Every policy proposes the same number of PROGRAMS per run, asked the way it was trained (m
programs per reply from its training config, or `--answers NAME=M`): a reply of m programs
counts m, so m = 1 and m = 3 backends meet on equal terms. Per run: the best scalar so far
(as a fraction of the instance's optimum) after each program proposed and against generated
tokens, the hypervolume of the programs found as a fraction of the oracle front's at evenly
spaced budget points, and whether the optimum was reached. Runs spend their whole budget
(no early stop at the optimum), so the hypervolume of every run covers the same budget.

Hard instances follow a rule fixed before any run: the instance's initial program is off the
optimum, AND no compared policy's sampling pool of `pool` answers reaches it (0: the first
rule alone); with `hard_below` < 1, no pool comes within that fraction of it. The first
`instances` test-split instances of `instance_seed` that pass are kept.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evo import metrics
from evo.compare.pools import FALLBACK_TOKENS
from evo.compare.spec_search import best_curve, floor_curve, hypervolume_curve, iterations_for, run_vectors
from evo.errors import UserError
from evo.policies.base import Policy
from tasks.base import Instance, Task

SOLVED = 1.0 - 1e-9  # best / optimum at or above this: the optimum is reached
REFERENCE = -0.1  # the hypervolume's reference point in every objective (objectives in [0, 1])
RECORD = "record.json"  # a finished run's record, in out/NAME/iINDEX-sSEED/


@dataclass(frozen=True)
class SearchProtocol:
    instances: int = 8  # hard held-out instances (0: skip the search)
    seeds: int = 2  # search runs per instance (run seeds 0 .. seeds - 1)
    programs: int = 240  # programs proposed per run, the same for every policy
    instance_seed: int = 777  # seed of the test-split instances the hard ones are picked from
    pool: int = 30  # the hard rule's sampling pool per policy (0: the initial-program rule alone)
    hard_below: float = 1.0  # hard: no pool reaches this fraction of the optimum (1: the optimum itself)
    points: int = 8  # budget points at which the archive's hypervolume is measured
    scan: int = 20  # instances scanned per hard instance asked for, at most


class Metered:
    """A policy that counts the tokens it generates per prompt, in call order (the loop asks
    one group at a time, in iteration order)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.tokens: list[int] = []

    def generate(self, prompts: Sequence[str], **options):
        replies = self.policy.generate(prompts, **options)
        self.tokens += [sum(len(c.token_ids) for c in row) for row in replies]
        return replies


def initial_off_optimum(task: Task, instance: Instance, directory: Path) -> bool:
    """Whether the instance's initial program falls short of its optimum (else search is moot)."""
    from evo import spec as specs
    from evo.sandbox.pool import Sandbox
    from evo.scores import scalarize

    problem = specs.load(task.problem_spec(instance, directory))
    with Sandbox.from_spec(problem) as sandbox:
        evaluation = sandbox.evaluate(problem.problem.program.read_text())
    if evaluation.scores is None:
        return True
    return float(scalarize(evaluation.scores, np.asarray(problem.problem.weights))) < task.oracle_best(instance) - 1e-9


def pools_reach(task: Task, instances: list[Instance], contenders, loaded: Mapping[str, Policy], pool: int,
                seed: int, fraction: float = 1.0, tokens_per_answer: int = FALLBACK_TOKENS) -> np.ndarray:
    """(instances,) whether any contender's pool of `pool` sampled answers (`tokens_per_answer`
    each, the comparison's sampling budget) reaches `fraction` of the optimum."""
    from evo.compare.pools import Sampling, sample_pool
    from evo.scores import scalarize

    optimum = np.array([task.oracle_best(i) for i in instances])
    reached = np.zeros(len(instances), dtype=bool)
    for contender in contenders:
        sampling = Sampling(pool=pool - pool % contender.answers or contender.answers, temperature=1.0, seed=seed,
                            tokens_per_answer=tokens_per_answer)
        vectors = sample_pool(loaded[contender.name], task, instances, contender.answers, sampling)
        reached |= scalarize(vectors, task.weights).max(axis=1) >= fraction * optimum - 1e-9
    return reached


def hard_instances(task: Task, search: SearchProtocol, directory: Path, contenders=(), loaded: Mapping[str, Policy] = {},
                   tokens_per_answer: int = FALLBACK_TOKENS) -> tuple[list[Instance], dict]:
    """The first `search.instances` test instances of `search.instance_seed` that pass the hard
    rule (its pools sampled at `tokens_per_answer` an answer), and what the scan saw (for the record)."""
    candidates = task.instances("test", search.instances * search.scan, seed=search.instance_seed)
    chosen: list[Instance] = []
    record: dict[str, list] = {"scanned": [], "initial_optimal": [], "pool_reached": []}
    step = max(2 * search.instances, 8)
    for start in range(0, len(candidates), step):
        chunk = candidates[start:start + step]
        record["scanned"] += [i.index for i in chunk]
        off = [i for i in chunk if initial_off_optimum(task, i, directory / f"check-{i.index}")]
        record["initial_optimal"] += sorted({i.index for i in chunk} - {i.index for i in off})
        if search.pool and off:
            reached = pools_reach(task, off, contenders, loaded, search.pool, search.instance_seed + start, search.hard_below,
                                  tokens_per_answer)
            record["pool_reached"] += [i.index for i, r in zip(off, reached) if r]
            off = [i for i, r in zip(off, reached) if not r]
        chosen += off
        if len(chosen) >= search.instances:
            break
    return chosen[: search.instances], record


def run_one(task: Task, instance: Instance, contender, policy: Policy, seed: int, search: SearchProtocol,
            directory: Path, tokens_per_answer: int | None = FALLBACK_TOKENS) -> dict:
    """One evolutionary run proposing `search.programs` programs, each with a completion budget of
    `tokens_per_answer` tokens (a reply of m programs: m times it), as the sampling pools (None:
    `evo run`'s default for the policy); its record (curves as lists)."""
    from evo import run_dir
    from evo import spec as specs
    from evo.loop import RunOptions

    optimum = task.oracle_best(instance)
    spec_path = task.problem_spec(instance, directory / "problem")
    spec = specs.load(spec_path)  # an instance's own objectives and weights (a task's may be padded: HumanEval)
    samples, weights = spec.search.samples_per_prompt, np.asarray(spec.problem.weights, dtype=np.float64)
    iterations = iterations_for(search.programs, samples, contender.answers)
    overrides = {"search.iterations": iterations, "search.answers": contender.answers,
                 "search.target": float(optimum) + 1.0}  # out of reach: every run spends its whole budget
    config = run_dir.new_config(spec_path, contender.uri, seed, directory / "run", overrides,
                                RunOptions(max_new_tokens=tokens_per_answer), "process")
    metered = Metered(policy)
    run_dir.execute(config, metered, progress=False)
    found = run_vectors(directory / "run")
    best = np.maximum(best_curve(found, weights, search.programs), 0.0) / optimum
    reference = np.full(len(weights), REFERENCE)
    front = np.asarray(task.oracle_front(instance), dtype=np.float64)[:, : len(weights)]
    volume_of = metrics.hypervolume if len(weights) <= 4 else metrics.hypervolume_estimate  # exact up to 4 objectives
    marks = budget_marks(search)
    volume = hypervolume_curve(found, reference, search.programs, search.points, volume_of) / volume_of(front, reference)
    distinct = np.cumsum(np.bincount(found.evaluated[found.evaluated <= search.programs] - 1, minlength=search.programs))
    return {"instance": instance.index, "seed": seed, "policy": contender.name, "answers": contender.answers,
            "iterations": iterations, "programs_per_iteration": samples * contender.answers,
            "best": best.round(6).tolist(), "tokens": np.cumsum(metered.tokens).tolist(),
            "distinct": distinct.tolist(), "floor": floor_curve(found, search.programs).round(6).tolist(),
            "hypervolume_at": marks, "hypervolume_estimated": len(weights) > 4,
            "hypervolume": [round(float(volume[m - 1]), 6) for m in marks]}



def run_all(task: Task, contenders, loaded: Mapping[str, Policy], search: SearchProtocol, out: Path,
            progress: Callable[[], None] = lambda: None, tokens_per_answer: int = FALLBACK_TOKENS) -> dict[str, list[dict]]:
    """Every contender's runs on the same hard instances and seeds (paired by position), run
    instance by instance and seed by seed (every contender's run of a pair before the next
    pair, so a stopped comparison holds complete pairs); each run's record is written to
    out/NAME/iINDEX-sSEED/record.json as it finishes, and a run that has one is not run again
    (`evo compare --resume`: an unfinished run's directory is started afresh). Runs propose
    programs at `tokens_per_answer` tokens each, and the hard rule's pools are sampled at it, as
    the comparison's own pools."""
    import shutil

    instances, record = hard_instances(task, search, out / "instances", contenders, loaded, tokens_per_answer)
    out.mkdir(parents=True, exist_ok=True)
    (out / "instances.json").write_text(json.dumps({"chosen": [i.index for i in instances], **record}) + "\n")
    runs: dict[str, list[dict]] = {contender.name: [] for contender in contenders}
    for instance in instances:
        for seed in range(search.seeds):
            for contender in contenders:
                directory = out / contender.name / f"i{instance.index}-s{seed}"
                done = directory / RECORD
                if done.is_file():
                    result = read_record(done, contender, instance.index, seed, search)
                else:
                    shutil.rmtree(directory, ignore_errors=True)
                    result = run_one(task, instance, contender, loaded[contender.name], seed, search, directory,
                                     tokens_per_answer)
                    done.write_text(json.dumps(result) + "\n")
                runs[contender.name].append(result)
                progress()
    return runs


def budget_marks(search: SearchProtocol) -> list[int]:
    """The programs proposed at which a run's hypervolume is measured."""
    return [round(search.programs * (i + 1) / search.points) for i in range(search.points)]


def read_record(path: Path, contender, instance: int, seed: int, search: SearchProtocol) -> dict:
    """A finished run's record, checked against the run it stands for; one line naming the file
    and what to do when it is damaged or belongs to another run."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        problem = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
    else:
        problem = record_problem(data, {"instance": instance, "seed": seed, "policy": contender.name,
                                        "answers": contender.answers}, search)
    if problem:
        raise UserError(f"{path}: damaged run record ({problem}); delete {path.parent} and run the same "
                        "evo compare command with --resume to run it again")
    return data


def record_problem(data: object, identity: Mapping, search: SearchProtocol) -> str:
    """What is wrong with a parsed run record (`identity`: the instance, seed, policy and answers
    it must carry), or ''."""
    if not isinstance(data, dict):
        return "expected a JSON object"
    for key, value in identity.items():
        if data.get(key) != value or isinstance(data.get(key), bool):
            return f"{key} {data.get(key)!r}, expected {value!r}"[:200]
    for key in ("iterations", "programs_per_iteration"):
        if not _count(data.get(key)) or data[key] < 1:
            return f"{key} should be a positive integer"
    best, tokens = _numbers(data.get("best"), search.programs), data.get("tokens")
    volume = _numbers(data.get("hypervolume"), search.points)
    if best is None or not all(math.isfinite(b) for b in best):
        return f"best should be {search.programs} finite numbers"
    if not isinstance(tokens, list) or not all(_count(t) and 0 <= t < 2**63 for t in tokens) or tokens != sorted(tokens):
        return "tokens should be a rising list of token counts"
    if data.get("hypervolume_at") != budget_marks(search):
        return f"hypervolume_at should be {budget_marks(search)}"
    if volume is None or len({math.isfinite(v) for v in volume}) > 1:
        return f"hypervolume should be {search.points} finite numbers (or NaN each, past four objectives)"
    return ""


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _numbers(value: object, length: int) -> list[float] | None:
    """`value` as `length` floats, or None when it is not a list of so many numbers."""
    if not isinstance(value, list) or len(value) != length:
        return None
    if not all(isinstance(v, float) or (_count(v) and abs(v) < 2**53) for v in value):
        return None
    return [float(v) for v in value]


def check_records(out: Path, contenders, search: SearchProtocol) -> None:
    """Every finished run record already in `out` (a comparison's search/), checked before any
    work; a directory named otherwise than iINDEX-sSEED is left alone."""
    for contender in contenders:
        for path in sorted((out / contender.name).glob(f"i*-s*/{RECORD}")):
            index, _, seed = path.parent.name[1:].partition("-s")
            if index.isdigit() and seed.isdigit():
                read_record(path, contender, int(index), int(seed), search)


def columns(runs: Sequence[dict]) -> dict[str, np.ndarray]:
    """Metric name -> one value per run (the paired unit): success, final best / oracle, the area
    under best-so-far (its mean over the budget), the final hypervolume / the oracle front's."""
    best = np.array([r["best"] for r in runs])
    return {"success": (best[:, -1] >= SOLVED).astype(np.float64), "final_best": best[:, -1],
            "area_best": best.mean(axis=1), "final_hypervolume": np.array([r["hypervolume"][-1] for r in runs])}


def summary(runs: Mapping[str, Sequence[dict]], baseline: str, seed: int = 0) -> dict[str, dict]:
    """Policy -> metric -> mean, CI and (not for the baseline) the paired difference to it."""
    from evo.compare import summary as tables

    return tables.table({name: columns(rs) for name, rs in runs.items()}, baseline, seed=seed)


def token_curves(runs: Mapping[str, Sequence[dict]], points: int = 100) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Best-so-far against generated tokens on one grid for every policy: (grid, name -> (runs, points))."""
    top = max((r["tokens"][-1] for rs in runs.values() for r in rs if r["tokens"]), default=1)
    grid = np.linspace(0, top, points)
    curves = {}
    for name, rs in runs.items():
        rows = []
        for r in rs:
            best = np.asarray(r["best"])
            per = r["programs_per_iteration"]
            after = [best[min(len(best), (k + 1) * per) - 1] for k in range(len(r["tokens"]))]
            index = np.searchsorted(np.asarray(r["tokens"]), grid, side="right") - 1
            rows.append(np.where(index >= 0, np.asarray(after)[np.clip(index, 0, None)], best[0]))
        curves[name] = np.array(rows)
    return grid, curves
