"""Checkpoints: a Hugging Face directory (weights, config, tokenizer) plus the trainer state.

`trainer_state.pt` holds the optimizer state and the number of finished steps, as plain
tensors and numbers: it is read with `weights_only=True`, so a state file from someone else
cannot run code. A save is atomic: everything is written to `.saving/`, which is then marked
complete (`.saving/COMPLETE`) before its files move into place; a save killed before the mark
is dropped, one killed after it is finished by `recover` (called before a resume reads the
directory), so weights and state always come from the same step. The per-step metrics live
in `metrics.jsonl`.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

from evo import training_log
from evo.errors import UserError

STATE_FILE = "trainer_state.pt"
STAGING, COMPLETE = ".saving", "COMPLETE"  # a save in progress; its mark once every file is written
METRICS_FILE = training_log.METRICS_FILE
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
    recover(run)
    weights = run / SNAPSHOTS / f"{step:06d}" if step else run
    if not (weights / "config.json").is_file():
        raise UserError(f"no checkpoint at {weights}: pass a run directory (and a step it kept a snapshot of)")
    model, tokenizer = models.load(str(weights))
    shutil.rmtree(out, ignore_errors=True)
    export(model, tokenizer, out, half=True)
    shutil.copy(run / CONFIG_FILE, out / CONFIG_FILE)
    kept = [record for record in read_metrics(run) if not step or record["step"] <= step]
    (out / METRICS_FILE).write_text("".join(json.dumps(record) + "\n" for record in kept))
    return out


def snapshot(directory: Path, model, tokenizer, step: int) -> Path:
    """Keep the weights after `step` in `directory/steps/NNNNNN` (float32, no optimizer state)."""
    out = directory / SNAPSHOTS / f"{step:06d}"
    export(model, tokenizer, out, half=False)
    return out


def save(directory: Path, model, tokenizer, optimizer: torch.optim.Optimizer, step: int) -> None:
    """Weights, tokenizer and trainer state of `step`, replacing the directory's, all or nothing."""
    directory = Path(directory)
    staging = directory / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    torch.save({"optimizer": optimizer.state_dict(), "step": int(step)}, staging / STATE_FILE)
    mark = staging / (COMPLETE + ".tmp")
    mark.write_text(f"{int(step)}\n")
    os.replace(mark, staging / COMPLETE)  # from here on the save happens, even after a kill
    recover(directory)


def recover(directory: Path) -> None:
    """Finish a save that was marked complete (move its remaining files into place), or drop
    one that was not; a no-op when no save was interrupted."""
    staging = Path(directory) / STAGING
    if not staging.is_dir():
        return
    if (staging / COMPLETE).is_file():
        for item in sorted(staging.iterdir(), key=lambda p: (p.name == STATE_FILE, p.name == COMPLETE)):
            if item.name != COMPLETE:
                os.replace(item, Path(directory) / item.name)
    shutil.rmtree(staging, ignore_errors=True)


def load_state(directory: Path) -> dict:
    """The trainer state: `{"optimizer": state dict, "step": int}`, loaded without unpickling
    code; a corrupt, truncated or foreign file is one-line UserError."""
    path = Path(directory) / STATE_FILE
    try:
        state = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as error:  # truncated zip, a pickle that asks for code, bad tensors: all unreadable
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UserError(f"{path} is not a readable trainer state ({reason[:160]}); "
                        "resume from a run this project wrote, or start a new --out") from None
    if not (isinstance(state, dict) and isinstance(state.get("optimizer"), dict)
            and isinstance(state.get("step"), int) and state["step"] >= 0):
        raise UserError(f"{path} is not a trainer state (expected the optimizer state and a step count); "
                        "start a new --out")
    return state


def has_state(directory: Path) -> bool:
    return (directory / STATE_FILE).exists()


def append_metrics(directory: Path, record: dict) -> None:
    with open(directory / METRICS_FILE, "a") as handle:
        handle.write(json.dumps(record) + "\n")


def read_metrics(directory: Path) -> list[dict]:
    """The logged records (evo.training_log.read_metrics: a partial last line is left out)."""
    return training_log.read_metrics(Path(directory) / METRICS_FILE)


def truncate_metrics(directory: Path, steps: int) -> None:
    """Keep the records of the first `steps` steps (a run killed after logging, before saving)."""
    training_log.truncate_metrics(Path(directory) / METRICS_FILE, steps)
