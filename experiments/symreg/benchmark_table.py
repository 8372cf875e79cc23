"""The 26 named benchmark problems as a table: per problem and method (seeds averaged), best@30 /
oracle and whether any of the pool's answers recovered the formula exactly, from evaluate.py's
JSON of `--split benchmark`.

    python experiments/symreg/benchmark_table.py experiments/symreg/eval/benchmark.json \\
        --method warm-up=warmup --method "warm-up (3)=warmup3" --method GRPO=grpo-s0,grpo-s1,grpo-s2 \\
        --method VPO=vpo-s0,vpo-s1,vpo-s2 --out experiments/symreg/eval/benchmark-table.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("evaluation", type=Path)
    parser.add_argument("--method", action="append", default=[], metavar="NAME=MODEL,MODEL")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    data = json.loads(args.evaluation.read_text())
    methods = {name: members.split(",") for name, _, members in (m.partition("=") for m in args.method)}
    best = {n: np.mean([data["models"][m]["per_instance"]["best@30/oracle"] for m in ms], axis=0) for n, ms in methods.items()}
    exact = {n: np.mean([np.asarray(data["models"][m]["per_instance"]["exact"]) > 0 for m in ms], axis=0)
             for n, ms in methods.items()}
    lines = ["best@30 / oracle per named problem (pools of 30, temperature 0.7; each method's seeds averaged); "
             "in parentheses the share of its seeds whose pool recovered the formula exactly.", "",
             "| problem | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
    for k, problem in enumerate(data["instances"]):
        lines.append(f"| {problem} | " + " | ".join(f"{best[n][k]:.3f} ({exact[n][k]:.2g})" for n in methods) + " |")
    lines.append("| **mean** | " + " | ".join(f"**{best[n].mean():.3f}** ({exact[n].mean():.2f})" for n in methods) + " |")
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
