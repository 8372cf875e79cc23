"""Copy RL lanes' run directories into the repository, small: a finished run as its last
snapshot in shipped form (training.checkpoint.ship: float16 weights, tokenizer, training
config, metrics; no optimizer state), an unfinished run whole (float32 weights and optimizer
state, which `evo train --resume` needs) with its snapshots stored as float16.

    python experiments/maze/pack_states.py --steps 600 /work/runs24/vpo-s1 ... --out experiments/maze/results-clusters/states
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file

from training.checkpoint import METRICS_FILE, SNAPSHOTS, recover, ship


def last_step(run: Path) -> int:
    rows = (run / METRICS_FILE).read_text().splitlines()
    return json.loads(rows[-1])["step"] if rows else 0


def halve(weights: Path) -> None:
    """A snapshot's float32 tensors as float16, in place (its config.json still says float32)."""
    tensors = load_file(weights)
    save_file({k: v.half() if v.is_floating_point() else v for k, v in tensors.items()}, weights, metadata={"format": "pt"})


def pack(run: Path, out: Path, steps: int) -> str:
    recover(run)
    shutil.rmtree(out, ignore_errors=True)
    if last_step(run) >= steps and (run / SNAPSHOTS / f"{steps:06d}").is_dir():
        ship(run, out, steps)
        return f"{run.name}: finished, step-{steps} snapshot shipped"
    shutil.copytree(run, out)
    for weights in (out / SNAPSHOTS).glob("*/model.safetensors"):
        halve(weights)
    return f"{run.name}: at step {last_step(run)}, resumable state copied"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--steps", type=int, required=True, help="the lanes' planned steps: a run that reached them is finished")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    for run in args.runs:
        print(pack(run, args.out / run.name, args.steps))


if __name__ == "__main__":
    main()
