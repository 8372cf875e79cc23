"""The sampling headline pooled over several fresh maze seeds: paired differences of two models
over every maze of every seed (each model's evaluate.py JSON per seed directory).

    python experiments/maze/pooled_headline.py experiments/maze/results-clusters/eval experiments/maze/results-clusters/eval/seed90210 \
        --pair vpo-s0:grpo-s0 --pair vpo-s0:grpo-s0-step400 --json out.json

A file NAME.json is looked up in each directory, then under the directory's seed prefix
(`seed90210-NAME.json`); a pair is reported only over the seeds where both models were evaluated.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from evo import metrics

COLUMNS = ("best_at_30_over_oracle", "pass_at_30", "front_coverage_at_30", "diversity_valid", "best_at_1")


def per_maze(directory: Path, name: str) -> dict[str, np.ndarray] | None:
    for path in (directory / f"{name}.json", directory / f"{directory.name}-{name}.json"):
        if path.is_file():
            data = json.loads(path.read_text())
            (model,) = data["models"].values()
            return {c: np.asarray(model["per_maze"][c], dtype=np.float64) for c in COLUMNS if c in model["per_maze"]}
    return None


def pooled(directories: list[Path], a: str, b: str) -> dict:
    seeds, left, right = [], {}, {}
    for directory in directories:
        x, y = per_maze(directory, a), per_maze(directory, b)
        if x is None or y is None:
            continue
        seeds.append(str(directory))
        for column in set(x) & set(y):
            left.setdefault(column, []).append(x[column])
            right.setdefault(column, []).append(y[column])
    result = {"seeds": seeds, "metrics": {}}
    for column in left:
        u, v = np.concatenate(left[column]), np.concatenate(right[column])
        test = metrics.paired_test(u, v, resamples=4000)
        per_seed = [float(np.mean(p - q)) for p, q in zip(left[column], right[column])]
        result["metrics"][column] = {"a": float(u.mean()), "b": float(v.mean()), "difference": test.mean_difference,
                                     "ci95": [test.low, test.high], "p": test.p_value, "mazes": int(len(u)),
                                     "per_seed": per_seed}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directories", nargs="+", type=Path, help="one directory of evaluate.py JSON per maze seed")
    parser.add_argument("--pair", action="append", required=True, metavar="A:B")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    out = {}
    for pair in args.pair:
        a, b = pair.split(":")
        out[pair] = result = pooled(args.directories, a, b)
        for column, m in result["metrics"].items():
            print(f"{a} - {b} {column}: {m['a']:.3f} vs {m['b']:.3f}, {m['difference']:+.3f} "
                  f"[{m['ci95'][0]:+.3f}, {m['ci95'][1]:+.3f}] p={m['p']:.2g} over {m['mazes']} mazes "
                  f"(per seed {', '.join(f'{d:+.3f}' for d in m['per_seed'])})")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
