"""Headroom and front width of the symreg test split BEFORE any RL: for N fresh test instances,
a pool of 30 candidates per instance from a checkpoint (30 single samples of the 1-expression
prompt; 10 x 3-expression sets) and from the demonstrations (30 draws of what a perfect
imitator of the warm-up data writes; the 1-expression demonstration is the formula itself), and
30 random grammar expressions (what candidates other than the formula reach), each answer
scored as it stands (evo compare's rule: a 3-expression set that does not parse scores zeros).

    OMP_NUM_THREADS=1 python experiments/symreg/headroom.py --checkpoint DIR --instances 200 --seed 4545 \\
        --threads 1 --out experiments/symreg/headroom

Per instance and in the mean: valid share, best@1, best@30 / oracle (the oracle is 1.0: the
true formula scores 1 in every region), exact recoveries in the pool (count, and whether any),
front width (distinct non-dominated region vectors among the valid answers, evo.metrics.front_width),
distinct valid vectors, and diversity over valid answers.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import tasks
from evo import metrics
from evo.compare import summary
from evo.compare.pools import Sampling, held_out, sample_pool
from tasks.base import ParseError, TemplateMismatch

POOL = 30
KS = (1, 5, 10, POOL)  # best@k of the tables; best@POOL is reported over the oracle
PROTOCOLS = {"1 expression": 1, "3-expression sets": 3}


def exact_counts(task, instances, texts: list, m: int) -> np.ndarray:
    """Per instance: how many answers of its pool recover the formula (a set that does not parse: none)."""
    counts = np.zeros(len(instances), dtype=int)
    for i, (instance, completions) in enumerate(zip(instances, texts)):
        for text, finished in completions:
            try:
                answers = task.parse(instance, text, m) if finished else []
            except (ParseError, TemplateMismatch):
                answers = []
            counts[i] += sum(task.recovered(instance, answer) for answer in answers)
    return counts


def demonstration_pool(task, instances, m: int) -> tuple[np.ndarray, list]:
    """(instances, 30, d) vectors and the texts of 30 / m demonstrations per instance."""
    vectors, texts = np.zeros((len(instances), POOL, len(task.objectives))), []
    for i, instance in enumerate(instances):
        rng = np.random.default_rng([instance.index, 45, m])
        drawn = [task.demonstrations(instance, m, rng) for _ in range(POOL // m)]
        texts.append([[text, True] for text in drawn])
        for j, text in enumerate(drawn):
            answers = task.parse(instance, text, m)
            vectors[i, j * m : (j + 1) * m] = np.array([task.score(instance, [a])[0] for a in answers])
    return vectors, texts


def grammar_pool(task, instances) -> tuple[np.ndarray, list]:
    """30 random grammar expressions per instance (the truth only by chance): the front that
    candidates which are not the formula reach."""
    from tasks.symreg.expressions import random_expression

    vectors, texts = np.zeros((len(instances), POOL, len(task.objectives))), []
    for i, instance in enumerate(instances):
        rng = np.random.default_rng([instance.index, 45, 0])
        drawn = [random_expression(instance.data[1].arity, rng) for _ in range(POOL)]
        texts.append([[text, True] for text in drawn])
        vectors[i] = np.array([task.score(instance, [text])[0] for text in drawn])
    return vectors, texts


def figures(task, held, vectors: np.ndarray, exact: np.ndarray) -> dict[str, list]:
    """Per-instance figures of one pool (lists, for JSON)."""
    columns = summary.per_instance(vectors, task.weights, held.optimum, KS)
    return {"valid": columns["valid"].tolist(), **{f"best@{k}": columns[f"best@{k}"].tolist() for k in KS[:-1]},
            f"best@{POOL}/oracle": columns[f"best@{POOL}/oracle"].tolist(), "exact": exact.tolist(),
            "front_width": [metrics.front_width(v) for v in vectors],
            "distinct_valid": [len(metrics.distinct_valid(v)) for v in vectors],
            "diversity_valid": columns["diversity_valid"].tolist()}


def means(per: dict[str, list]) -> dict[str, float]:
    out = {key: float(np.mean(values)) for key, values in per.items()}
    widths, exact = np.array(per["front_width"]), np.array(per["exact"])
    out.update({"exact_any": float(np.mean(exact > 0)), "front_width_above_1": float(np.mean(widths > 1)),
                "front_width_median": float(np.median(widths))})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="a symreg checkpoint directory (omit: demonstrations only)")
    parser.add_argument("--instances", type=int, default=200)
    parser.add_argument("--seed", type=int, default=4545, help="the test split's instance seed")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--tokens-per-answer", type=int, default=96)
    parser.add_argument("--batch", type=int, default=10, help="instances per policy call")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", required=True, help="path prefix for .json and .md")
    args = parser.parse_args()
    task = tasks.get("symreg")
    held = held_out(task, args.instances, args.seed, fronts=False)
    instances = held.instances
    results: dict = {"settings": vars(args), "pools": {},
                     "instances": [{"formula": i.data[0].formula, "arity": i.data[1].arity} for i in instances]}
    for name, m in PROTOCOLS.items():
        vectors, texts = demonstration_pool(task, instances, m)
        per = figures(task, held, vectors, exact_counts(task, instances, texts, m))
        results["pools"][f"demonstrations, {name}"] = {"mean": means(per), "per_instance": per}
    vectors, texts = grammar_pool(task, instances)
    per = figures(task, held, vectors, exact_counts(task, instances, texts, 1))
    results["pools"]["random grammar expressions"] = {"mean": means(per), "per_instance": per}
    if args.checkpoint:
        import torch

        from evo import policies

        torch.set_num_threads(args.threads)
        policy = policies.load(f"local:{args.checkpoint}", device="cpu")
        for name, m in PROTOCOLS.items():
            sampling = Sampling(pool=POOL, tokens_per_answer=args.tokens_per_answer, temperature=args.temperature,
                                batch=args.batch, seed=args.seed, slack=8)
            started, texts = time.time(), []
            vectors = sample_pool(policy, task, instances, m, sampling, texts=texts)
            per = figures(task, held, vectors, exact_counts(task, instances, texts, m))
            results["pools"][f"warm-up, {name}"] = {"mean": means(per), "per_instance": per,
                                                    "seconds": round(time.time() - started, 1)}
            print(name, json.dumps(results["pools"][f"warm-up, {name}"]["mean"]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out + ".json").write_text(json.dumps(results, indent=1) + "\n")
    Path(args.out + ".md").write_text(markdown(results))
    print(Path(args.out + ".md").read_text())


def markdown(results: dict) -> str:
    s = results["settings"]
    lines = [f"{s['instances']} symreg test instances (seed {s['seed']}); pools of {POOL} answers per instance, "
             f"temperature {s['temperature']}; oracle best = 1.0 on every instance.", "",
             "| pool | valid | best@1 | best@30 / oracle | exact (answers) | exact (any) | front width (mean) "
             "| front width > 1 | distinct valid vectors | diversity (valid) |", "|" + "---|" * 10]
    for name, pool in results["pools"].items():
        r = pool["mean"]
        lines.append(f"| {name} | {r['valid']:.3f} | {r['best@1']:.3f} | {r['best@30/oracle']:.3f} | {r['exact']:.2f} "
                     f"| {r['exact_any']:.3f} | {r['front_width']:.2f} | {r['front_width_above_1']:.3f} "
                     f"| {r['distinct_valid']:.2f} | {r['diversity_valid']:.3f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
