"""Checkpoints: a Hugging Face directory (weights, config, tokenizer) plus the trainer state.

`trainer_state.pt` holds the optimizer state and the number of finished steps, as plain
tensors and numbers: it is read with `weights_only=True`, so a state file from someone else
cannot run code. A save is atomic: everything is written to `.saving/`, which is then marked
complete (`.saving/COMPLETE`) before its files move into place; a save killed before the mark
is dropped, one killed after it is finished by `recover` (called before a resume reads the
directory), so weights and state always come from the same step. The per-step metrics live
in `metrics.jsonl`.

Exports chain: a run's Hugging Face files are written in the dtype its init checkpoint came
in (`precision.checkpoint_dtype`), config.json saying so: a bf16 checkpoint trained with
float32 masters comes out bf16 (the masters rounded), the size it went in, and `evo train
--init` of it plans exactly as from the original (the same precision plan, rate and memory
plan). The float32 masters a resume needs are kept beside them in `masters.safetensors` (only
when they differ from the exported weights). A LoRA model is written from its merged weights,
one layer at a time (`models.merged_weights`), never a second copy of the model.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

from evo import training_log
from evo.errors import UserError
from training.models import merged_weights

STATE_FILE = "trainer_state.pt"
MASTERS_FILE = "masters.safetensors"  # the float32 masters of a run exported in 16 bits (what a resume reads)
STAGING, COMPLETE = ".saving", "COMPLETE"  # a save in progress; its mark once every file is written
METRICS_FILE = training_log.METRICS_FILE
SNAPSHOTS = "steps"  # out/steps/000100: the weights after step 100, for held-out curves


def export(model, tokenizer, out: Path, *, half: bool = True, dtype: torch.dtype | None = None) -> None:
    """Write a Hugging Face directory to ship or serve (LoRA merged, layer by layer); `model` is
    unchanged. `dtype`: every floating tensor stored in it and config.json saying it (a run's
    export in its init's dtype: `vllm serve` and `from_pretrained(dtype="auto")` compute in it).
    Else config.json says the dtype the model computes in, and with `half` float32 weights are
    stored as float16 (half the bytes; the tiny shipped checkpoints), 16-bit ones as they are."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    compute = next(model.parameters()).dtype
    stored = dtype or (torch.float16 if half else None)
    state = _converted(model, stored)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    base.save_pretrained(out, safe_serialization=True, state_dict=state)
    tokenizer.save_pretrained(out)
    config = json.loads((out / "config.json").read_text())
    for key in ("dtype", "torch_dtype"):
        if key in config or key == "dtype":
            config[key] = str(dtype or compute).removeprefix("torch.")
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def _converted(model, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """The model's merged weights (`models.merged_weights`) as a state dict on the CPU, float32
    tensors in `dtype` (None: as they are); the model's tensors that share storage (tied
    weights) still share it. A merged LoRA weight is a temporary of its own, never shared."""
    owned = {t.data_ptr() for t in model.state_dict().values()}
    done: dict[tuple, torch.Tensor] = {}
    state = {}
    for name, tensor in merged_weights(model):
        key = (tensor.device, tensor.data_ptr(), tensor.shape, tensor.stride())
        if key not in done or tensor.data_ptr() not in owned:
            floating = tensor.is_floating_point() and dtype is not None and tensor.dtype == torch.float32
            converted = tensor.detach().to("cpu", dtype=dtype if floating else tensor.dtype)
            if tensor.data_ptr() not in owned:
                state[name] = converted
                continue
            done[key] = converted
        state[name] = done[key]
    return state


def ship(run: Path, out: Path, step: int = 0) -> Path:
    """A trained run as a checkpoint to ship: `export`'s float16 weights (config.json saying
    float32; a run from a 16-bit checkpoint stays in its dtype), the tokenizer, the training config and metrics, no optimizer state; replaces `out`.
    `step`: ship the run's snapshot of that step (`snapshot`), its metrics up to that step."""
    from training import models
    from training.config import CONFIG_FILE

    run, out = Path(run), Path(out)
    recover(run)
    weights = run / SNAPSHOTS / f"{step:06d}" if step else run
    if not (weights / "config.json").is_file():
        raise UserError(f"no checkpoint at {weights}: pass a run directory (and a step it kept a snapshot of)")
    from training import precision

    stored = precision.checkpoint_dtype(weights)
    model, tokenizer = models.load(str(weights))
    shutil.rmtree(out, ignore_errors=True)
    export(model, tokenizer, out, half=True, dtype=stored if stored in precision.HALF else None)
    shutil.copy(run / CONFIG_FILE, out / CONFIG_FILE)
    kept = [record for record in read_metrics(run) if not step or record["step"] <= step]
    (out / METRICS_FILE).write_text("".join(json.dumps(record) + "\n" for record in kept))
    return out


def snapshot(directory: Path, model, tokenizer, step: int, dtype: torch.dtype = torch.float32) -> Path:
    """Keep the weights after `step` in `directory/steps/NNNNNN` (in `dtype`, no optimizer state)."""
    out = directory / SNAPSHOTS / f"{step:06d}"
    export(model, tokenizer, out, half=False, dtype=dtype)
    return out


def save(directory: Path, model, tokenizer, optimizer: torch.optim.Optimizer, step: int,
         dtype: torch.dtype = torch.float32) -> None:
    """Weights (in `dtype`, the init's: `export`; the float32 masters beside them when they differ),
    tokenizer and trainer state of `step`, replacing the directory's, all or nothing."""
    directory = Path(directory)
    staging = directory / STAGING
    shutil.rmtree(staging, ignore_errors=True)
    export(model, tokenizer, staging, half=False, dtype=dtype)
    if not hasattr(model, "get_base_model") and any(p.dtype != dtype for p in model.parameters()):
        from safetensors.torch import save_model

        save_model(model, str(staging / MASTERS_FILE))  # a LoRA run does not resume: its merged export is all
    else:
        (directory / MASTERS_FILE).unlink(missing_ok=True)
    torch.save({"optimizer": optimizer.state_dict(), "step": int(step)}, staging / STATE_FILE)
    mark = staging / (COMPLETE + ".tmp")
    mark.write_text(f"{int(step)}\n")
    os.replace(mark, staging / COMPLETE)  # from here on the save happens, even after a kill
    recover(directory)


def load_masters(directory: Path, model) -> None:
    """Load the run's float32 masters into `model` when it kept them (a 16-bit export)."""
    path = Path(directory) / MASTERS_FILE
    if not path.is_file():
        return
    from safetensors.torch import load_model

    try:
        load_model(model, str(path), strict=True, device=str(next(model.parameters()).device))
    except Exception as error:  # truncated or foreign file
        raise UserError(f"{path} is not this run's master weights ({str(error).splitlines()[0][:160]}); "
                        "start a new --out") from None


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
