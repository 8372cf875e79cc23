"""The dtypes a training run holds and computes its weights in, as one pure plan.

Full fine-tuning keeps float32 master weights (and float32 AdamW moments) wherever it runs;
on CUDA a 16-bit checkpoint then computes under bfloat16 autocast (TRL's and veRL's default:
float32 parameters, bf16 matmuls). Pure bfloat16 weights are used only when asked
(`weight_dtype="bfloat16"`), with a warning: AdamW's step at lr 1e-6 is below a bf16 weight's
rounding step (1/256 of its size), so most weights, and every norm gain, never move.
LoRA keeps the frozen base in the checkpoint's dtype on CUDA (peft holds the adapters in
float32). `plan` is a function of its arguments only, so a CPU test can build the plan of a
CUDA run and train with it (CPU autocast has bfloat16 too).

    >>> plan("cuda", torch.bfloat16, lora=False)
    Precision(weights=torch.float32, frozen=torch.bfloat16, autocast=True, warning=None)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

SETTINGS = ("auto", "float32", "bfloat16")  # TrainConfig.weight_dtype
HALF = (torch.bfloat16, torch.float16)
PURE_BF16 = ("--weight-dtype bfloat16: pure bf16 weights and AdamW moments, so an update below 1/256 of a weight "
             "rounds away (at lr 1e-6 most weights and every norm never move); drop it for float32 master weights")


@dataclass(frozen=True)
class Precision:
    weights: torch.dtype  # the trained parameters (and so AdamW's moments); the LoRA base on CUDA
    frozen: torch.dtype  # a frozen copy (the KL reference)
    autocast: bool  # bfloat16 autocast for sampling and the loss forward
    warning: str | None = None  # one line to print before training, when the plan is a risky one


def plan(device: str, checkpoint: torch.dtype, *, lora: bool, setting: str = "auto", bf16: bool | None = None) -> Precision:
    """The plan of a run on `device` ("cpu" or "cuda") from a checkpoint stored as `checkpoint`.
    `setting`: "auto" (float32 masters for full fine-tuning; the checkpoint's dtype for a LoRA
    base on CUDA; float32 on CPU), "float32" or "bfloat16" (pure bf16, warned). `bf16`: autocast
    as asked; None: on when CUDA computes a 16-bit checkpoint from float32 weights."""
    if setting not in SETTINGS:
        raise ValueError(f"weight_dtype must be one of {', '.join(SETTINGS)}, got {setting!r}")
    cuda = str(device).startswith("cuda")
    if setting == "float32":
        weights = torch.float32
    elif setting == "bfloat16":
        weights = torch.bfloat16
    else:
        weights = checkpoint if cuda and lora else torch.float32
    frozen = checkpoint if cuda else torch.float32
    autocast = bf16 if bf16 is not None else cuda and checkpoint in HALF and weights == torch.float32
    warning = PURE_BF16 if weights in HALF and not lora else None
    return Precision(weights, frozen, bool(autocast), warning)


def checkpoint_dtype(path: str | Path) -> torch.dtype:
    """The dtype a Hugging Face directory's config.json declares (`dtype`, or `torch_dtype`
    before transformers 5); float32 when it declares none."""
    try:
        config = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError):
        return torch.float32
    name = config.get("dtype") or config.get("torch_dtype") or "float32"
    dtype = getattr(torch, str(name), None)
    return dtype if isinstance(dtype, torch.dtype) else torch.float32


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
