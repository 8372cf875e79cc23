"""Turn evaluate.py's JSON into the committed table: per-algorithm means over seeds, and
paired bootstrap intervals of (algorithm - GRPO) across held-out mazes.

    python experiments/maze/table.py experiments/maze/results/eval.json --commands experiments/maze/results/commands.txt \
        --out experiments/maze/results/table
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from evo import metrics

COLUMNS = ("best_at_1", "best_at_5", "best_at_10", "best_at_30", "diversity", "pareto_fraction", "valid")
# Columns of the evaluations made since December 3 (oracle) and December 4 (best@30 / oracle, diversity
# over the valid candidates: the headline diversity, the all-rows figure beside it); a column shows
# when every model has it.
OPTIONAL = ("best_at_30_over_oracle", "diversity_valid", "pass_at_30", "front_coverage_at_30")
ORDER = ("best_at_1", "best_at_5", "best_at_10", "best_at_30", "best_at_30_over_oracle", "diversity_valid", "diversity",
         "pareto_fraction", "valid", "pass_at_30", "front_coverage_at_30")
PAIRED = ("best_at_1", "best_at_30", "diversity")  # compared with the baseline, plus the optional columns when present
HEADS = {"best_at_1": "best@1", "best_at_5": "best@5", "best_at_10": "best@10", "best_at_30": "best@30",
         "best_at_30_over_oracle": "best@30 / oracle", "diversity_valid": "diversity (valid)",
         "diversity": "diversity (all rows)", "pareto_fraction": "Pareto frac.", "valid": "valid",
         "pass_at_30": "solved@30", "front_coverage_at_30": "front cov.@30"}


def oracle_columns_of(models: dict) -> tuple[str, ...]:
    """The optional columns that every model has."""
    return tuple(c for c in OPTIONAL if all(c in r["per_maze"] for r in models.values()))


def columns_of(models: dict) -> tuple[str, ...]:
    present = COLUMNS + oracle_columns_of(models)
    return tuple(c for c in ORDER if c in present)


def grouped(models: dict) -> dict[str, dict[int | None, dict]]:
    """Models named ALGO-sSEED are grouped by ALGO and keyed by seed, in seed order; any other
    name is its own group, under the key None."""
    groups: dict[str, dict[int | None, dict]] = defaultdict(dict)
    for name, result in models.items():
        algo, _, seed = name.rpartition("-s")
        if algo and seed.isdigit():
            groups[algo][int(seed)] = result
        else:
            groups[name][None] = result
    return {algo: dict(sorted(runs.items(), key=lambda item: item[0] or 0)) for algo, runs in groups.items()}


def per_maze(runs: dict, column: str) -> np.ndarray:
    """The column per maze, averaged over the group's seeds (`runs`: one group of grouped())."""
    return np.mean([r["per_maze"][column] for r in runs.values()], axis=0)


def per_seed_differences(runs: dict, baseline: dict, column: str) -> list[float]:
    """Mean (run - baseline) of the column for each seed both groups have, in seed order: the
    spread across training seeds, which the per-maze bootstrap does not see."""
    common = [seed for seed in runs if seed is not None and seed in baseline]
    return [float(np.mean(runs[s]["per_maze"][column]) - np.mean(baseline[s]["per_maze"][column])) for s in common]


def build(models: dict, baselines: list[str]) -> dict:
    groups = grouped(models)
    rows = {}
    for algo, runs in groups.items():
        results = list(runs.values())
        row = {"seeds": len(results), "mode": results[0]["mode"]}
        for column in columns_of(models):
            seed_means = [float(np.mean(r["per_maze"][column])) for r in results]
            row[column] = float(np.mean(seed_means))
            row[f"{column}_seed_range"] = [min(seed_means), max(seed_means)]
        for baseline in baselines:
            if baseline not in groups or algo == baseline:
                continue
            for column in PAIRED + oracle_columns_of(models):
                test = metrics.paired_test(per_maze(runs, column), per_maze(groups[baseline], column), resamples=5000)
                row[f"{column}_minus_{baseline}"] = {"mean": test.mean_difference, "ci95": [test.low, test.high], "p": test.p_value,
                                                     "per_seed": per_seed_differences(runs, groups[baseline], column)}
        rows[algo] = row
    return rows


def markdown(rows: dict, baselines: list[str], mazes: int) -> str:
    present = COLUMNS + tuple(c for c in OPTIONAL if all(c in r for r in rows.values()))
    columns = tuple(c for c in ORDER if c in present)
    lines = ["| model | seeds | " + " | ".join(HEADS[c] for c in columns) + " |", "|" + "---|" * (len(columns) + 2)]
    for algo, r in rows.items():
        lines.append(f"| {algo} ({r['mode']}) | {r['seeds']} | " + " | ".join(f"{r[c]:.3f}" for c in columns) + " |")
    for baseline in baselines:
        lines += ["", f"Paired differences vs {baseline} across {mazes} held-out mazes (seeds averaged per maze; 95% bootstrap CI; Wilcoxon p; with several seeds, also each seed's run minus the baseline's run of that seed):", ""]
        for algo, r in rows.items():
            for column in PAIRED + OPTIONAL:
                d = r.get(f"{column}_minus_{baseline}")
                if d:
                    seeds = d["per_seed"]
                    spread = f"; per seed {', '.join(f'{v:+.3f}' for v in seeds)}" if len(seeds) > 1 else ""
                    lines.append(f"- {algo} {column}: {d['mean']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}], p={d['p']:.2g}{spread}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("evaluations", nargs="+")
    parser.add_argument("--baseline", action="append", help="paired differences against this group (repeatable; default grpo)")
    parser.add_argument("--commands", help="a text file with the exact commands, copied into the JSON")
    parser.add_argument("--out", required=True, help="path prefix for .md and .json")
    args = parser.parse_args()
    models, settings = {}, {}
    for path in args.evaluations:
        if Path(path).resolve() == Path(args.out + ".json").resolve():
            continue  # this table's own earlier output, caught by a glob over its directory
        data = json.loads(Path(path).read_text())
        if "models" not in data:
            parser.error(f"{path} is not an evaluation file of evaluate.py (no 'models')")
        models.update(data["models"])
        settings = data["settings"]
    baselines = args.baseline or ["grpo"]
    rows = build(models, baselines)
    commands = Path(args.commands).read_text().splitlines() if args.commands else []
    Path(args.out + ".json").write_text(json.dumps({"settings": settings, "rows": rows, "commands": commands}, indent=1) + "\n")
    Path(args.out + ".md").write_text(markdown(rows, baselines, settings.get("mazes", 0)))
    print(Path(args.out + ".md").read_text())


if __name__ == "__main__":
    main()
