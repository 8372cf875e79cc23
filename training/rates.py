"""The learning rate a run uses when none is given: chosen by the model's size.

A model under TINY_PARAMETERS is one of the project's tiny models trained from scratch (the
shipped checkpoints are under 1M parameters): 2e-4, the rate its warm-up and RL recipes were
tuned at. A pretrained model is fine-tuned at the paper's rate, 1e-6 (also TRL's GRPOConfig
and veRL's actor default for 1.5B-8B models), and its LoRA adapters at 1e-5. An explicit
`--lr` is kept, with a one-line warning when it is more than WARN_FACTOR times the rate
recommended for the model (a tiny model's 2e-4 on a 1.5B model is 200x).

    >>> recommended(1_500_000_000, lora=False)
    1e-06
"""

from __future__ import annotations

import sys
from dataclasses import replace

import torch

TINY_PARAMETERS = 100_000_000
TINY_LR, FULL_LR, LORA_LR = 2e-4, 1e-6, 1e-5
RANGES = {False: "5e-7 to 5e-6", True: "5e-6 to 1e-4"}  # full fine-tuning, LoRA: what the recipes we checked use
WARN_FACTOR = 30


def recommended(parameters: int, *, lora: bool) -> float:
    """The default lr of a model with this many parameters (base weights, LoRA or not)."""
    if parameters < TINY_PARAMETERS:
        return TINY_LR
    return LORA_LR if lora else FULL_LR


def parameters(model: torch.nn.Module) -> int:
    """All parameters, a peft wrapper's frozen base included (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters())


def parameters_at(path: str) -> int:
    """`parameters` of the causal LM in a Hugging Face directory, built on the meta device
    from its config.json (no weights read, no memory)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        return parameters(AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path)))


def resolved(config, count: int):
    """`config` (a TrainConfig) with its lr: `recommended` for a model of `count` parameters when
    it is 0; an explicit one far above that is kept and warned about, in one line on stderr."""
    lora = bool(config.lora_rank)
    rate = recommended(count, lora=lora)
    if not config.lr:
        return replace(config, lr=rate)
    if count >= TINY_PARAMETERS and config.lr > WARN_FACTOR * rate:
        print(f"warning: --lr {config.lr:g} is {config.lr / rate:.0f}x the {'LoRA' if lora else 'full fine-tuning'} rate "
              f"for a {count / 1e9:.2f}B-parameter model ({rate:g}; recipes use {RANGES[lora]}); "
              "leave --lr out to use it", file=sys.stderr, flush=True)
    return config
