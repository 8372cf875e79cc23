"""Checkpoints: a Hugging Face directory (weights, config, tokenizer) plus the trainer state.

`trainer_state.pt` holds the optimizer state and the number of finished steps; it is written
last, so a directory with it is complete. The per-step metrics live in `metrics.jsonl`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

STATE_FILE = "trainer_state.pt"
METRICS_FILE = "metrics.jsonl"


def save(directory: Path, model, tokenizer, optimizer: torch.optim.Optimizer, step: int) -> None:
    staging = directory / ".saving"
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    torch.save({"optimizer": optimizer.state_dict(), "step": step}, staging / STATE_FILE)
    for item in sorted(staging.iterdir(), key=lambda p: p.name == STATE_FILE):
        os.replace(item, directory / item.name)
    staging.rmdir()


def load_state(directory: Path) -> dict:
    return torch.load(directory / STATE_FILE, weights_only=False)


def has_state(directory: Path) -> bool:
    return (directory / STATE_FILE).exists()


def append_metrics(directory: Path, record: dict) -> None:
    with open(directory / METRICS_FILE, "a") as handle:
        handle.write(json.dumps(record) + "\n")


def read_metrics(directory: Path) -> list[dict]:
    path = directory / METRICS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def truncate_metrics(directory: Path, steps: int) -> None:
    """Keep the records of the first `steps` steps (a run killed after logging, before saving)."""
    kept = [r for r in read_metrics(directory) if r["step"] <= steps]
    (directory / METRICS_FILE).write_text("".join(json.dumps(r) + "\n" for r in kept))
