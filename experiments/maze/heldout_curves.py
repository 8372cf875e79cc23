"""Held-out curves: every run's weight snapshots (`evo train --snapshot-every N` keeps them in
RUN/steps/NNNNNN) and its warm-up (step 0) evaluated on the same held-out mazes with matched
candidate pools (`evo compare`'s sampling and per-instance metrics).

Writes OUT.json (per-maze values of every evaluated checkpoint; re-running evaluates only new
snapshots), OUT.png (best@1, best@30, solved@30, front coverage@30, diversity and the valid
share against the training step, one line per algorithm: the mean over its seeds, a band from min to max) and
OUT-final.json (each run's last snapshot and the warm-up in evaluate.py's format, for table.py).

    python experiments/maze/heldout_curves.py RUNS/grpo-s0 RUNS/vpo-s0 --task maze-notes \
        --tokens-per-answer 96 --mazes 100 --out experiments/maze/results-long/curves
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

import tasks
from evo import policies
from evo.compare.pools import HeldOut, Sampling, held_out, sample_pool
from evo.compare.summary import per_instance
from training.checkpoint import SNAPSHOTS
from training.config import TrainConfig
from training.rollouts import answers_for

PANELS = (("best@1", "best@1"), ("best@30", "best@30"), ("pass@30", "solved@30"),
          ("front_coverage@30", "front coverage@30"), ("diversity", "diversity (mean pairwise L1)"),
          ("valid", "valid answers (share of the pool)"))
RUN_NAME = re.compile(r"^(?P<algo>.+)-s(?P<seed>\d+)$")


def checkpoints(run: Path, every: int, last: int, cached: dict) -> tuple[TrainConfig, list[tuple[int, Path]]]:
    """The run's config and its (step, directory) snapshots at multiples of `every` up to
    `last` (0: all), the warm-up first as step 0. Steps already in the cache count even when
    their snapshot is gone (a committed run keeps its state, not its snapshots)."""
    config = TrainConfig.load(run)
    found = {int(p.name): p for p in (run / SNAPSHOTS).glob("[0-9]*")} if (run / SNAPSHOTS).exists() else {}
    for key in cached:
        name, _, rest = key.partition("@")
        if name == run.name and rest[:6].isdigit():
            found.setdefault(int(rest[:6]), run / SNAPSHOTS / rest[:6])
    steps = [(s, found[s]) for s in sorted(found) if s % every == 0 and (not last or s <= last)]
    return config, [(0, Path(config.init)), *steps]


def evaluate(path: Path, answers: int, task, mazes: HeldOut, sampling: Sampling) -> dict[str, list[float]]:
    """Per-maze metrics of one checkpoint's matched pool."""
    vectors = sample_pool(policies.load(f"local:{path}"), task, mazes.instances, answers, sampling)
    columns = per_instance(vectors, task.weights, mazes.optimum, (1, 5, 10, 30), mazes.fronts)
    return {name: values.tolist() for name, values in columns.items()}


def key_of(run: Path, step: int, path: Path, answers: int) -> str:
    """The cache key: the warm-up by its path, a snapshot by run name and step (so a run
    directory that moved, e.g. a committed one, keeps its evaluations)."""
    return f"warmup:{path}#{answers}" if step == 0 else f"{run.name}@{step:06d}#{answers}"


def load_cache(path: Path, settings: dict) -> dict:
    if not path.exists():
        return {"settings": settings, "checkpoints": {}}
    cache = json.loads(path.read_text())
    if cache["settings"] != settings:
        raise SystemExit(f"{path} was made with other settings ({cache['settings']}); choose another --out")
    return cache


def plot(curves: dict[str, dict[int, list[dict]]], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5))
    axes = axes.ravel()
    for axis, (metric, label) in zip(axes, PANELS):
        for algo, by_step in sorted(curves.items()):
            steps = sorted(by_step)
            values = [[float(np.mean(seed[metric])) for seed in by_step[s]] for s in steps]
            mean = [np.mean(v) for v in values]
            seeds = max(len(v) for v in values)  # the band spans the steps that several seeds reached
            line, = axis.plot(steps, mean, marker="o", markersize=3, label=f"{algo} ({seeds} seed{'s' * (seeds > 1)})")
            axis.fill_between(steps, [min(v) for v in values], [max(v) for v in values], color=line.get_color(), alpha=0.15)
        axis.set_title(label)
        axis.set_xlabel("training step (0 = warm-up)")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories named ALGO-sSEED")
    parser.add_argument("--task", default="maze")
    parser.add_argument("--mazes", type=int, default=100)
    parser.add_argument("--maze-seed", type=int, default=12345)
    parser.add_argument("--tokens-per-answer", type=int, default=64, help="96 for maze-notes")
    parser.add_argument("--pool", type=int, default=30)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--every", type=int, default=100, help="evaluate the snapshots at multiples of this step")
    parser.add_argument("--last", type=int, default=0, help="ignore snapshots after this step (0: none ignored)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True, help="prefix of OUT.json, OUT.png, OUT-final.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    task = tasks.get(args.task)
    mazes = held_out(task, args.mazes, args.maze_seed)
    sampling = Sampling(pool=args.pool, tokens_per_answer=args.tokens_per_answer, temperature=args.temperature, seed=args.maze_seed)
    settings = {"task": args.task, "mazes": args.mazes, "maze_seed": args.maze_seed, "pool": args.pool,
                "tokens_per_answer": args.tokens_per_answer, "temperature": args.temperature}
    cache_path = args.out.with_suffix(".json")
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    cache = load_cache(cache_path, settings)
    curves: dict[str, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    final = {"settings": {**settings, "source": "heldout_curves.py"}, "models": {}}
    for run in args.runs:
        match = RUN_NAME.match(run.name)
        if match is None:
            raise SystemExit(f"{run}: run directories must be named ALGO-sSEED (e.g. vpo-s0)")
        config, snaps = checkpoints(run, args.every, args.last, cache["checkpoints"])
        answers = answers_for(config.algo, config.answers)
        for step, path in snaps:
            key = key_of(run, step, path, answers)
            if key not in cache["checkpoints"]:
                started = time.time()
                cache["checkpoints"][key] = evaluate(path, answers, task, mazes, sampling)
                cache_path.write_text(json.dumps(cache) + "\n")
                print(f"{run.name} step {step}: best@30 {np.mean(cache['checkpoints'][key]['best@30']):.3f} "
                      f"({time.time() - started:.0f} s)", flush=True)
            curves[match["algo"]][step].append(cache["checkpoints"][key])
        last_step, last = snaps[-1]
        mode = "set" if answers > 1 else "single"
        final["models"][run.name] = {"path": str(last), "mode": mode, "m": answers, "step": last_step,
                                     "per_maze": {k.replace("@", "_at_"): v for k, v in cache["checkpoints"][key_of(run, last_step, last, answers)].items()}}
        final["models"].setdefault(f"warmup-{mode}", {"path": config.init, "mode": mode, "m": answers, "step": 0,
                                                      "per_maze": {k.replace("@", "_at_"): v for k, v in cache["checkpoints"][key_of(run, 0, snaps[0][1], answers)].items()}})
    for record in final["models"].values():
        record["mean"] = {k: float(np.mean(v)) for k, v in record["per_maze"].items()}
    args.out.with_name(args.out.name + "-final.json").write_text(json.dumps(final) + "\n")
    plot(curves, args.out.with_suffix(".png"), f"{args.task}: {args.mazes} held-out mazes (seed {args.maze_seed}), pool of {args.pool}, temperature {args.temperature}")
    print(f"wrote {cache_path}, {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
