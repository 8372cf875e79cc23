"""Copy a trained run into a shipped checkpoint (training.checkpoint.ship): float16 weights
(config.json says float32, like the warm-ups), tokenizer, the training config and metrics (no
optimizer state), so that `local:DIR` and `vllm serve DIR` load it.

    python experiments/maze/ship.py /tmp/maze-runs/vpo-s0 evo/checkpoints/maze-vpo
    python experiments/maze/ship.py RUNS/vpo-s0 evo/checkpoints/maze-notes-vpo --step 600   # a snapshot

With --step N the weights come from the run's snapshot RUN/steps/NNNNNN (`evo train
--snapshot-every`) and the metrics stop at step N.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evo.errors import UserError
from training.checkpoint import ship


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--step", type=int, default=0, help="ship the snapshot of this step (0: the run's last state)")
    args = parser.parse_args()
    try:
        out = ship(args.run, args.out, args.step)
    except UserError as error:
        raise SystemExit(f"ship.py: {error}") from None
    size = sum(p.stat().st_size for p in out.iterdir())
    print(f"{out}: {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
