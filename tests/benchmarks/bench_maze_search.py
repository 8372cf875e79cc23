"""Maze search: how often evolution reaches the oracle optimum within 200 policy samples.

    python tests/benchmarks/bench_maze_search.py [--quick] [--mazes N] [--checkpoint local:maze-warmup]

Held-out (test split) mazes whose initial route (the task's demonstration) is below the
oracle's best scalar ("hard" mazes). For each, `evo`'s loop runs with the maze's problem
spec (`continue` prompts) until the best program reaches the oracle optimum or 200 policy
samples are spent (50 iterations x 4 samples). Per-maze outcomes give bootstrap CIs and a
paired test (one run per maze and policy; the mazes are the repeats). Policies:
- ours: the shipped tiny checkpoint (`local:maze-warmup`);
- baseline: random routes continuing the prompt's prefix (a random walk over open cells,
  the `mutate:` idea for route text: no model).
Evaluation goes through the sandbox (the maze specs use isolation "none": a pure, trusted
scorer). The last line is one JSON object: the solved fractions and the ratio.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

SAMPLES, CALLS = 4, 200


class RandomRoutes:
    """Continue the route prefix at the end of a `continue` prompt with a random walk."""

    def __init__(self, maze) -> None:
        self.maze = maze

    def generate(self, prompts, *, n=1, seed=None, **options):
        from evo.policies.base import Completion

        rng = np.random.default_rng(seed)
        return [[Completion(self._walk(prompt, rng)) for _ in range(n)] for prompt in prompts]

    def _walk(self, prompt: str, rng: np.random.Generator) -> str:
        from tasks.maze.formats import ROW_LABELS, cell_name

        tail = prompt.rsplit("\n", 1)[-1]
        cells = [(ROW_LABELS.index(r), int(c)) for r, c in re.findall(r"([a-j])([0-9])", tail)]
        dangling = tail[-1] if tail and tail[-1] in ROW_LABELS else None
        cell = cells[-1] if cells else self.maze.start
        text = ""
        options = [n for n in self.maze.neighbours(cell) if dangling is None or ROW_LABELS[n[0]] == dangling]
        if dangling is not None:
            if not options:
                return "\n"
            cell = options[int(rng.integers(len(options)))]
            text = cell_name(cell)[1:]
        for _ in range(self.maze.budget - len(cells)):
            if cell == self.maze.exit:
                break
            steps = self.maze.neighbours(cell)
            cell = steps[int(rng.integers(len(steps)))]
            text += cell_name(cell)
        return text + "\n"


def hard_mazes(task, count: int, directory: Path) -> list[tuple]:
    from evo import spec as specs
    from evo.sandbox.pool import Sandbox
    from tasks.maze.oracle import solve

    found = []
    for instance in task.instances("test", count * 20, seed=11):
        oracle = solve(instance.data)
        spec_path = task.problem_spec(instance, directory / f"maze{instance.index}")
        spec = specs.load(spec_path)
        with Sandbox.from_spec(spec) as sandbox:
            initial = sandbox.evaluate(spec.problem.program.read_text())
        if initial.ok and float(np.mean(initial.scores)) < oracle.best_scalar - 1e-9:
            found.append((instance, spec, oracle.best_scalar))
        if len(found) == count:
            break
    return found


def search(spec, policy, best_possible: float, seed: int, directory: Path) -> bool:
    from evo.loop import LoopConfig, run
    from evo.search import Search

    config = LoopConfig(iterations=CALLS // SAMPLES, seed=seed, samples=SAMPLES, batch=4, depth=1,
                        style="continue", max_new_tokens=64, temperature=1.0, target=best_possible - 1e-9)
    with Search.of_spec(spec, directory, seed=seed) as search:  # the maze specs say isolation = "none": a trusted scorer
        progress = run(search.evolution(config), policy, search.evaluator)
    return progress.reached_target


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--mazes", type=int, default=None)
    parser.add_argument("--checkpoint", default="local:maze-warmup")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    import tasks
    from evo.policies import load

    count = args.mazes or (5 if args.quick else 30)
    root = Path(tempfile.mkdtemp(prefix="bench-maze-"))
    task = tasks.get("maze")
    mazes = hard_mazes(task, count, root)
    try:
        model = load(args.checkpoint)
    except Exception as error:  # no shipped checkpoint yet: report the baseline alone
        print(f"checkpoint {args.checkpoint} unavailable ({error}); measuring the baseline only")
        model = None
    solved = {"ours": [], "baseline": []}
    started = time.perf_counter()
    for index, (instance, spec, best) in enumerate(mazes):
        solved["baseline"].append(search(spec, RandomRoutes(instance.data), best, index, root / f"b{index}"))
        if model is not None:
            solved["ours"].append(search(spec, model, best, index, root / f"o{index}"))
        print(f"maze {instance.index}: best {best:.3f} baseline {solved['baseline'][-1]} "
              f"ours {solved['ours'][-1] if model is not None else '-'}", flush=True)
    from evo.metrics import bootstrap_ci, paired_test

    intervals = {name: bootstrap_ci(np.array(values, dtype=float)) for name, values in solved.items() if values}
    for name, interval in intervals.items():
        print(f"{name}: solved {interval.estimate:.3f} (95% bootstrap CI {interval.low:.3f}-{interval.high:.3f})")
    result = {"name": "maze_search", "mazes": len(mazes), "policy_samples": CALLS,
              "ours_solved_fraction": None, "baseline_solved_fraction": intervals["baseline"].estimate,
              "baseline_ci": [intervals["baseline"].low, intervals["baseline"].high], "ratio": None,
              "seconds": time.perf_counter() - started}
    if "ours" in intervals:
        test = paired_test(np.array(solved["ours"], float), np.array(solved["baseline"], float))
        baseline = intervals["baseline"].estimate
        result.update({"ours_solved_fraction": intervals["ours"].estimate,
                       "ours_ci": [intervals["ours"].low, intervals["ours"].high],
                       "ratio": intervals["ours"].estimate / baseline if baseline else None,
                       "paired_difference_ci": [test.low, test.high], "wilcoxon_p": test.p_value})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
