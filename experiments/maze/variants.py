"""Measure maze variants before any RL: the oracle's Pareto front (mean size and histogram),
the distinct achievable reward vectors, the headroom a 30-sample pool of demonstrations
leaves (best@30 / oracle, solved@30, front coverage@30), and, for a trained warm-up, the
same figures from its samples (evaluate.py's protocol: 30 single-route samples per maze,
temperature 0.7, every answer scored as it stands).

    python experiments/maze/variants.py --mazes 200 --warmup maze-clusters=DIR --out experiments/maze/results-clusters/variants
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np

import tasks
from evo.compare import summary
from evo.compare.pools import HeldOut, Sampling
from tasks.maze import MazeTask


def candidates() -> dict[str, MazeTask]:
    clusters = tasks.get("maze-clusters")
    return {
        "maze-notes": tasks.get("maze-notes"),  # the paper's maze: the reference
        "maze-clusters": clusters,  # four 3x3 clusters of 5 tiles, budget = the cheapest whole cluster's route
        "clusters, budget 2 under it": MazeTask(replace(clusters.config, slack=-2), name="c2", notes=True, take=clusters.take),
        "clusters, budget 4 under it": MazeTask(replace(clusters.config, slack=-4), name="c4", notes=True, take=clusters.take),
    }


def front_figures(task: MazeTask, instances: list) -> dict:
    fronts = [task.oracle_front(i) for i in instances]
    sizes = np.array([len(f) for f in fronts])
    return {"front_mean": float(sizes.mean()), "front_histogram": np.bincount(sizes).tolist(),
            "front_above_3": float((sizes > 3).mean()),
            "vectors_mean": float(np.mean([len(task.oracle_vectors(i)) for i in instances])),
            "oracle_best_mean": float(np.mean([task.oracle_best(i) for i in instances]))}


def pool_figures(task: MazeTask, held: HeldOut, vectors: np.ndarray) -> dict:
    columns = summary.per_instance(vectors, task.weights, held.optimum, [1, 30], held.fronts)
    return {"best_at_30": float(columns["best@30"].mean()),
            "best_at_30_over_oracle": float(columns["best@30"].mean() / held.optimum.mean()),
            "solved_at_30": float(columns["pass@30"].mean()), "front_coverage_at_30": float(columns["front_coverage@30"].mean()),
            "valid": float(columns["valid"].mean()), "diversity_valid": float(columns["diversity_valid"].mean())}


def demo_pool(task: MazeTask, instances: list, pool: int) -> np.ndarray:
    """(mazes, pool, d) vectors of the warm-up's demonstration routes: what a perfect imitator samples."""
    from tasks.maze import demos

    rows = []
    for instance in instances:
        rng = np.random.default_rng([instance.index, 7])
        rows.append([task.vector(instance.data, demos.random_route(instance.data, rng, task.take)) for _ in range(pool)])
    return np.array(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mazes", type=int, default=200)
    parser.add_argument("--maze-seed", type=int, default=12345)
    parser.add_argument("--warmup", action="append", default=[], metavar="TASK=DIR", help="a warm-up of one candidate")
    parser.add_argument("--tokens-per-route", type=int, default=96)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", action="append", help="measure only these candidates (repeatable)")
    parser.add_argument("--out", required=True, help="path prefix for .json and .md")
    args = parser.parse_args()
    results = {"settings": vars(args), "candidates": {}}
    warmups = dict(spec.split("=", 1) for spec in args.warmup)
    for name, task in candidates().items():
        if args.only and name not in args.only:
            continue
        instances = task.instances("test", args.mazes, seed=args.maze_seed)
        held = HeldOut(instances, np.array([task.oracle_best(i) for i in instances]), [task.oracle_front(i) for i in instances])
        row = {"objectives": list(task.objectives), **front_figures(task, instances),
               "demonstrations": pool_figures(task, held, demo_pool(task, instances, 30))}
        if name in warmups:
            import torch

            from evo import policies
            from evo.compare.pools import sample_pool

            torch.set_num_threads(args.threads)
            sampling = Sampling(pool=30, tokens_per_answer=args.tokens_per_route, temperature=0.7, batch=25,
                                seed=args.maze_seed, slack=4)
            vectors = sample_pool(policies.load(f"local:{warmups[name]}", device="cpu"), task, instances, 1, sampling)
            row["warmup"] = {"path": warmups[name], **pool_figures(task, held, vectors)}
        results["candidates"][name] = row
        print(name, json.dumps(row), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out + ".json").write_text(json.dumps(results, indent=1) + "\n")
    Path(args.out + ".md").write_text(markdown(results))
    print(Path(args.out + ".md").read_text())


def markdown(results: dict) -> str:
    lines = [f"{results['settings']['mazes']} test mazes (seed {results['settings']['maze_seed']}); pools of 30; "
             "best@30 / oracle = mean best@30 over mean oracle best scalar.", "",
             "| candidate | objectives | front (mean) | front histogram (0, 1, 2, ... points) | front > 3 | distinct vectors "
             "| demos best@30 / oracle | demos solved@30 | demos front cov.@30 | warm-up best@30 / oracle | warm-up solved@30 "
             "| warm-up front cov.@30 | warm-up valid |", "|" + "---|" * 13]
    for name, r in results["candidates"].items():
        d, w = r["demonstrations"], r.get("warmup")
        warm = (f"{w['best_at_30_over_oracle']:.3f} | {w['solved_at_30']:.3f} | {w['front_coverage_at_30']:.3f} | {w['valid']:.3f}"
                if w else "- | - | - | -")
        lines.append(f"| {name} | {len(r['objectives'])} | {r['front_mean']:.2f} | {r['front_histogram']} | {r['front_above_3']:.2f} "
                     f"| {r['vectors_mean']:.1f} | {d['best_at_30_over_oracle']:.3f} | {d['solved_at_30']:.3f} "
                     f"| {d['front_coverage_at_30']:.3f} | {warm} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
