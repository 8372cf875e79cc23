"""Copy a trained run into a shipped checkpoint: float16 weights (config.json says float32,
like the warm-ups), tokenizer, the training config and metrics (no optimizer state), so that
`local:DIR` and `vllm serve DIR` load it.

    python examples/maze/ship.py /tmp/maze-runs/vpo-s0 evo/checkpoints/maze-vpo
    python examples/maze/ship.py RUNS/vpo-s0 evo/checkpoints/maze-notes-vpo --step 600   # a snapshot

With --step N the weights come from the run's snapshot RUN/steps/NNNNNN (`evo train
--snapshot-every`) and the metrics stop at step N.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from evo import tiny
from training.checkpoint import SNAPSHOTS, export


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--step", type=int, default=0, help="ship the snapshot of this step (0: the run's last state)")
    args = parser.parse_args()
    weights = args.run / SNAPSHOTS / f"{args.step:06d}" if args.step else args.run
    if not (weights / "config.json").is_file():
        raise SystemExit(f"ship.py: no checkpoint at {weights}: pass a run directory (and a --step it kept a snapshot of)")
    model, tokenizer = tiny.load(weights)
    shutil.rmtree(args.out, ignore_errors=True)
    export(model, tokenizer, args.out, half=True)
    shutil.copy(args.run / "train_config.json", args.out / "train_config.json")
    rows = (args.run / "metrics.jsonl").read_text().splitlines()
    kept = [row for row in rows if not args.step or json.loads(row)["step"] <= args.step]
    (args.out / "metrics.jsonl").write_text("".join(row + "\n" for row in kept))
    size = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"{args.out}: {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
