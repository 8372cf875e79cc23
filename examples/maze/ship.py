"""Copy a trained run into a shipped checkpoint: float16 weights (config.json says float32,
like the warm-ups), tokenizer, the training config and metrics (no optimizer state), so that
`local:DIR` and `vllm serve DIR` load it.

    python examples/maze/ship.py /tmp/maze-runs/vpo-s0 evo/checkpoints/maze-vpo
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from training import models
from training.checkpoint import export


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    model, tokenizer = models.load(args.run)
    shutil.rmtree(args.out, ignore_errors=True)
    export(model, tokenizer, args.out, half=True)
    for name in ("train_config.json", "metrics.jsonl"):
        shutil.copy(args.run / name, args.out / name)
    size = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"{args.out}: {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
