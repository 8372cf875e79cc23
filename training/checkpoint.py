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

from evo.errors import UserError

STATE_FILE = "trainer_state.pt"
METRICS_FILE = "metrics.jsonl"
SNAPSHOTS = "steps"  # out/steps/000100: the weights after step 100, for held-out curves


def export(model, tokenizer, out: Path, *, half: bool = True) -> None:
    """Write a Hugging Face directory to ship or serve; config.json's dtype is the dtype the
    model computes in. With `half` float32 weights are stored as float16 (half the bytes), and
    config.json still says float32, so `from_pretrained(dtype="auto")` and `vllm serve` compute
    in float32 like the model that was trained; bf16 / fp16 weights are stored as they are.
    `model` is unchanged."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.half() if v.dtype == torch.float32 else v for k, v in model.state_dict().items()} if half else None
    model.save_pretrained(out, safe_serialization=True, state_dict=state)
    tokenizer.save_pretrained(out)
    config = json.loads((out / "config.json").read_text())
    compute = str(next(model.parameters()).dtype).removeprefix("torch.")
    for key in ("dtype", "torch_dtype"):
        if key in config or key == "dtype":
            config[key] = compute
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def ship(run: Path, out: Path, step: int = 0) -> Path:
    """A trained run as a checkpoint to ship: `export`'s float16 weights (config.json saying
    float32), the tokenizer, the training config and metrics, no optimizer state; replaces `out`.
    `step`: ship the run's snapshot of that step (`snapshot`), its metrics up to that step."""
    from training import models
    from training.config import CONFIG_FILE

    run, out = Path(run), Path(out)
    weights = run / SNAPSHOTS / f"{step:06d}" if step else run
    if not (weights / "config.json").is_file():
        raise UserError(f"no checkpoint at {weights}: pass a run directory (and a step it kept a snapshot of)")
    model, tokenizer = models.load(str(weights))
    shutil.rmtree(out, ignore_errors=True)
    export(model, tokenizer, out, half=True)
    shutil.copy(run / CONFIG_FILE, out / CONFIG_FILE)
    rows = (run / METRICS_FILE).read_text().splitlines()
    kept = [row for row in rows if not step or json.loads(row)["step"] <= step]
    (out / METRICS_FILE).write_text("".join(row + "\n" for row in kept))
    return out


def snapshot(directory: Path, model, tokenizer, step: int) -> Path:
    """Keep the weights after `step` in `directory/steps/NNNNNN` (float32, no optimizer state)."""
    out = directory / SNAPSHOTS / f"{step:06d}"
    export(model, tokenizer, out, half=False)
    return out


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
