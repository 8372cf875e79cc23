"""Evaluate maze checkpoints on held-out mazes with matched candidate pools.

A `single` model answers the 1-route prompt `--pool` times; a `set` model answers the
m-route prompt `--pool / m` times (a rollout of m routes counts as m candidates); a `goal`
model (goal-conditioned GRPO) answers `--pool` 1-route prompts that each show a freshly
drawn objective weighting (Dirichlet(1), seeded by --maze-seed, the same weightings for
every goal model; the task rounds them to what its prompt can show). The mode of a trained run is its algo's prompt in
`evo train --list-algos`. Every
candidate gets a reward vector, scored as it stands and route by route (`--scoring
evaluation`, tasks/completions.py: a repeated route keeps its real vector, a malformed or
cut-off route scores zero alone); `--scoring training` applies the training reward's rules
instead (repeats score zero, an unparseable, wrong-count or truncated completion gives m
zero rows), the rules of the evaluations made before December 4. Per maze we keep the
candidates' scalars and vectors, then summarise best@k (unbiased, from the pool), best@30 as
a fraction of the oracle's best scalar, pass@k against it, reward-space diversity (mean
pairwise L1) over the valid candidates and over all rows, the Pareto fraction and the pool's
Dirichlet-weighted coverage of the oracle front. `--completions DIR` keeps every completion
(DIR/NAME.json.gz); `--from-completions DIR` re-scores kept completions without sampling.

    python experiments/maze/evaluate.py --model grpo-s0=runs/grpo-s0:single --model vpo-s0=runs/vpo-s0:set \
        --mazes 200 --out experiments/maze/results/eval.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

import numpy as np
import torch

import tasks
from evo import policies
from evo.compare import summary
from evo.compare.pools import Sampling, held_out, sample_pool
from tasks.completions import EVALUATION, TRAINING, score_completion
from training.advantages import PROMPTS as MODES

KS = (1, 5, 10, 30)
TOKENS_PER_ROUTE = 64  # a route of 21 moves (the longest budget seen) is 65 characters with its separator


def goal_pool(mazes: int, pool: int, d: int, seed: int) -> np.ndarray:
    """(mazes, pool, d) weightings for `goal` models: one per candidate, the same for every model."""
    return np.random.default_rng([seed, 1]).dirichlet(np.ones(d), size=(mazes, pool))


def summarise(vectors: np.ndarray, weights: np.ndarray, optimum: np.ndarray, fronts: list[np.ndarray]) -> dict:
    """best@k, pass@k (the oracle's best scalar reached), diversity, Pareto fraction and valid
    share per maze (evo compare's metrics), and the whole pool's front coverage: under 256
    Dirichlet(1) weightings, its best candidate as a fraction of the oracle front's best."""
    columns = summary.per_instance(vectors, weights, optimum, [k for k in KS if k <= vectors.shape[1]], fronts)
    per_maze = {name.replace("@", "_at_").replace("/", "_over_"): values.tolist() for name, values in columns.items()}
    return {"mean": {key: float(np.mean(v)) for key, v in per_maze.items()}, "per_maze": per_maze}


SCORINGS = {"evaluation": EVALUATION, "training": TRAINING}


def rescore(task, instances, texts: list, m: int, scoring) -> np.ndarray:
    """(mazes, pool, d) vectors of kept completions ([text, finished] per completion, per maze)."""
    return np.array([np.concatenate([score_completion(task, instance, text, finished, m, scoring)[0] for text, finished in kept])
                     for instance, kept in zip(instances, texts)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", required=True, metavar="NAME=DIR:single|set|goal")
    parser.add_argument("--task", default="maze")
    parser.add_argument("--tokens-per-route", type=int, default=TOKENS_PER_ROUTE, help="96 for maze-notes")
    parser.add_argument("--mazes", type=int, default=200)
    parser.add_argument("--maze-seed", type=int, default=12345)
    parser.add_argument("--pool", type=int, default=30)
    parser.add_argument("--answers", type=int, default=3)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--batch", type=int, default=25, help="mazes per sampling batch")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--scoring", choices=sorted(SCORINGS), default="evaluation")
    parser.add_argument("--completions", help="directory: keep every completion in NAME.json.gz")
    parser.add_argument("--from-completions", help="directory of kept completions: re-score them instead of sampling")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    task = tasks.get(args.task)
    mazes = held_out(task, args.mazes, args.maze_seed)
    results = {"settings": vars(args), "models": {}}
    for spec in args.model:
        name, _, rest = spec.partition("=")
        path, _, mode = rest.rpartition(":")
        if mode not in MODES:
            parser.error(f"--model {spec}: the mode after the last ':' must be one of {', '.join(MODES)}")
        m = args.answers if mode == "set" else 1
        goals = goal_pool(args.mazes, args.pool, len(task.objectives), args.maze_seed) if mode == "goal" else None
        sampling = Sampling(pool=args.pool, tokens_per_answer=args.tokens_per_route, temperature=args.temperature,
                            batch=args.batch, seed=args.maze_seed, slack=4)
        started = time.time()
        if args.from_completions:
            texts = json.loads(gzip.decompress((Path(args.from_completions) / f"{name}.json.gz").read_bytes()))
        else:
            texts = []
            sample_pool(policies.load(f"local:{path}", device="cpu"), task, mazes.instances, m, sampling, goals=goals, texts=texts)
        if args.completions:
            Path(args.completions).mkdir(parents=True, exist_ok=True)
            (Path(args.completions) / f"{name}.json.gz").write_bytes(gzip.compress(json.dumps(texts).encode(), mtime=0))
        vectors = rescore(task, mazes.instances, texts, m, SCORINGS[args.scoring])
        summary = summarise(vectors, np.asarray(task.weights, dtype=np.float64), mazes.optimum, mazes.fronts)
        results["models"][name] = {"path": path, "mode": mode, "m": m, "seconds": round(time.time() - started, 1),
                                   "scoring": args.scoring, **summary}
        print(name, json.dumps({k: round(v, 4) for k, v in summary["mean"].items()}), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results) + "\n")


if __name__ == "__main__":
    main()
