"""One supervised warm-up step: examples sorted by length in micro-batches vs one padded batch.

Same process, same model (the maze-notes warm-up's nano8 shape, fresh weights), same
batches (24 maze-notes demonstrations, half in the 3-route template), threads pinned.
Each variant runs `--steps` forward+backward passes after one warm-up pass; both orders
alternate per repeat, and we report the median and range of seconds per step.

    python tests/benchmarks/bench_sft_step.py [--threads 2] [--steps 8] [--repeats 3]

The last line is JSON: {"name": "sft_step", "one_batch_s": ..., "micro_batches_s": ..., "ratio": ...}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import tasks  # noqa: E402
from training import tiny  # noqa: E402
from training.sft import SFTConfig, collate, micro_batches, sample_batch  # noqa: E402


def step(model, batches: list[dict]) -> None:
    counts = [int((b["labels"] != -100).sum()) for b in batches]
    model.zero_grad(set_to_none=True)
    for batch, count in zip(batches, counts):
        (model(**batch).loss * (count / sum(counts))).backward()


def timed(model, batches_per_step: list[list[dict]]) -> float:
    step(model, batches_per_step[0])  # warm-up
    started = time.perf_counter()
    for batches in batches_per_step:
        step(model, batches)
    return (time.perf_counter() - started) / len(batches_per_step)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--groups", type=int, default=SFTConfig.length_groups)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    task = tasks.get("maze-notes")
    tokenizer = tiny.char_tokenizer()
    model = tiny.new_model("nano8", "gpt2", tokenizer, context=640, seed=0)
    config = SFTConfig(batch_size=24, pool=200)
    pool = task.instances("train", config.pool, seed=0)
    rng = np.random.default_rng(0)
    examples = [sample_batch(task, pool, tokenizer, config, rng) for _ in range(args.steps)]
    one = [[collate(e, tokenizer.pad_token_id)] for e in examples]
    split = [micro_batches(e, tokenizer.pad_token_id, args.groups) for e in examples]
    padded = sum(b["input_ids"].numel() for s in one for b in s)
    kept = sum(b["input_ids"].numel() for s in split for b in s)
    results: dict[str, list[float]] = {"one": [], "micro": []}
    for repeat in range(args.repeats):
        order = ("one", "micro") if repeat % 2 == 0 else ("micro", "one")
        for name in order:
            results[name].append(timed(model, one if name == "one" else split))
    summary = {name: (statistics.median(v), min(v), max(v)) for name, v in results.items()}
    for name, (median, low, high) in summary.items():
        print(f"{name:6s} {median:.3f} s/step  (range {low:.3f}-{high:.3f}, {args.repeats} repeats x {args.steps} steps)")
    print(f"tokens computed: micro-batches {kept / padded:.2f} of the padded batch's")
    print(json.dumps({"name": "sft_step", "threads": args.threads, "groups": args.groups,
                      "one_batch_s": round(summary["one"][0], 4), "micro_batches_s": round(summary["micro"][0], 4),
                      "ratio": round(summary["one"][0] / summary["micro"][0], 3), "token_share": round(kept / padded, 3)}))


if __name__ == "__main__":
    main()
