"""The symreg sampling table on fresh instance seeds: per model and seed the means of
evaluate.py's figures, and paired differences of method groups pooled over the seeds (each
method's seeds averaged per instance, then paired over every instance of every instance seed;
bootstrap 95% CI and Wilcoxon p, evo.metrics.paired_test), over every instance and over those
whose formula is not one bare variable.

    python experiments/symreg/table.py experiments/symreg/eval/table-5151.json experiments/symreg/eval/table-6262.json \\
        --method vpo=vpo-s0,vpo-s1 --method grpo=grpo-s0,grpo-s1,grpo-s2 --method warmup3=warmup3 \\
        --pair vpo:grpo --pair vpo:warmup3 --out experiments/symreg/eval/table
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from evo import metrics

FIGURES = ("valid", "best@1", "best@5", "best@10", "best@30/oracle", "exact_any", "front_width", "diversity_valid")
PAIRED = ("best@1", "best@5", "best@10", "best@30/oracle", "exact_any", "diversity_valid")


def per_instance(model: dict, figure: str) -> np.ndarray:
    values = model["per_instance"]["exact" if figure == "exact_any" else figure]
    return (np.asarray(values) > 0).astype(np.float64) if figure == "exact_any" else np.asarray(values, dtype=np.float64)


def method_values(evaluations: list[dict], members: list[str], figure: str) -> np.ndarray | None:
    """(instances of every seed,) the method's seeds averaged per instance; None when a seed lacks one."""
    rows = []
    for evaluation in evaluations:
        if not all(m in evaluation["models"] for m in members):
            return None
        rows.append(np.mean([per_instance(evaluation["models"][m], figure) for m in members], axis=0))
    return np.concatenate(rows)


def bare_variables(evaluations: list[dict]) -> np.ndarray:
    """(instances of every seed,) whether the instance's formula is one bare variable (x0, x1, ...):
    the generator draws x0 for about a fifth of its formulas, and one constant answer gets them all."""
    import tasks

    task = tasks.get("symreg")
    return np.concatenate([[i.data[0].formula.strip() in {f"x{k}" for k in range(9)}
                            for i in task.instances("test", e["settings"]["instances"], seed=e["settings"]["seed"])]
                           for e in evaluations])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("evaluations", nargs="+", type=Path, help="evaluate.py JSON files, one per instance seed")
    parser.add_argument("--method", action="append", default=[], metavar="NAME=MODEL,MODEL", help="a method's seeds")
    parser.add_argument("--pair", action="append", default=[], metavar="A:B", help="report A - B (repeatable)")
    parser.add_argument("--out", required=True, help="path prefix for .json and .md")
    args = parser.parse_args()
    evaluations = [json.loads(path.read_text()) for path in args.evaluations]
    seeds = [e["settings"]["seed"] for e in evaluations]
    methods = {name: members.split(",") for name, _, members in (m.partition("=") for m in args.method)}
    lines = [f"Instance seeds {', '.join(map(str, seeds))} ({', '.join(str(e['settings']['instances']) for e in evaluations)} "
             "instances); pools of 30 answers, temperature 0.7; oracle best = 1.0.", "",
             "| model | instance seed | m | " + " | ".join(FIGURES) + " |", "|---|---|---|" + "---|" * len(FIGURES)]
    result: dict = {"seeds": seeds, "models": {}, "pairs": {}}
    for name in dict.fromkeys(m for e in evaluations for m in e["models"]):
        for seed, evaluation in zip(seeds, evaluations):
            if name in evaluation["models"]:
                model = evaluation["models"][name]
                row = {f: float(per_instance(model, f).mean()) for f in FIGURES}
                result["models"].setdefault(name, {})[seed] = row
                lines.append(f"| {name} | {seed} | {model['m']} | " + " | ".join(f"{row[f]:.3f}" for f in FIGURES) + " |")
    lines += ["", "Paired over every instance of every seed (each method's seeds averaged per instance):", "",
              "| pair | instances | " + " | ".join(PAIRED) + " |", "|---|---|" + "---|" * len(PAIRED)]
    bare = bare_variables(evaluations)
    rows = [(pair, slice(None)) for pair in args.pair] + [(pair + ":nontrivial", ~bare) for pair in args.pair]
    for pair, keep in rows:
        a, b = pair.split(":")[:2]
        cells, entry = [], {}
        for figure in PAIRED:
            left, right = (method_values(evaluations, methods[m], figure)[keep] for m in (a, b))
            test = metrics.paired_test(left, right, resamples=4000)
            entry[figure] = {"a": float(left.mean()), "b": float(right.mean()), "difference": test.mean_difference,
                             "ci95": [test.low, test.high], "p": test.p_value, "instances": len(left)}
            cells.append(f"{test.mean_difference:+.3f} [{test.low:+.3f}, {test.high:+.3f}]")
        ratio = entry["diversity_valid"]["a"] / max(entry["diversity_valid"]["b"], 1e-12)
        entry["diversity_ratio"] = ratio
        result["pairs"][pair] = entry
        label = f"{a} - {b}" + (", formula not a bare variable" if pair.endswith(":nontrivial") else "")
        lines.append(f"| {label} | {entry['best@1']['instances']} | " + " | ".join(cells) + " |")
    lines += ["", f"{int(bare.sum())} of {len(bare)} instances have a bare variable as their formula.", "Methods: " + "; ".join(f"{n} = {', '.join(m)}" for n, m in methods.items()) + ". Diversity ratios: "
              + "; ".join(f"{p.replace(':', ' / ')} {e['diversity_ratio']:.1f}x" for p, e in result["pairs"].items()
                       if not p.endswith(":nontrivial")) + "."]
    result["methods"] = methods
    Path(args.out + ".json").write_text(json.dumps(result, indent=1) + "\n")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
