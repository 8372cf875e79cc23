"""Training curves in one table: each run's metrics averaged over its first and last N steps.

    python experiments/maze/curves.py /tmp/maze-runs/grpo-s0 /tmp/maze-runs/vpo-s0 [--window 20]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from training.checkpoint import read_metrics

COLUMNS = ("scalar", "best_in_set", "diversity", "parse_failed", "truncated")  # entropy: only --entropy-coef runs log it


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--window", type=int, default=20)
    args = parser.parse_args()
    print("| run | steps | " + " | ".join(COLUMNS) + " | tokens/step | minutes |")
    print("|---" * (len(COLUMNS) + 5) + "|")
    for run in args.runs:
        records = read_metrics(run)  # metrics.jsonl, or an archived run's metrics.jsonl.gz
        first, last = records[: args.window], records[-args.window:]
        cells = [f"{np.mean([r[c] for r in first]):.3f} -> {np.mean([r[c] for r in last]):.3f}" for c in COLUMNS]
        tokens = np.mean([r["tokens_per_s"] * r["seconds"] for r in records])
        minutes = sum(r["seconds"] for r in records) / 60
        print(f"| {run.name} | {len(records)} | " + " | ".join(cells) + f" | {tokens:.0f} | {minutes:.1f} |")


if __name__ == "__main__":
    main()
