"""The model the trainer updates: any Hugging Face causal LM, on a chosen device, with
gradient checkpointing and LoRA adapters (its prompt format: evo.policies.prompt_format).

Llama, Qwen2/Qwen3, Mistral and GPT-2 layouts load through `AutoModelForCausalLM`, in the
dtype `training.precision.plan` gives: float32 master weights for full fine-tuning (a bf16
checkpoint on CUDA then computes under bf16 autocast), the checkpoint's dtype for a LoRA base
on CUDA. LoRA (the `peft` extra) trains adapters only; every checkpoint and weight sync carries
the merged weights, so `local:` and `vllm serve` load them like any other directory.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from evo.errors import UserError
from evo.policies.local import load_causal_lm
from training import precision

DEVICES = ("auto", "cpu", "cuda")
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "c_attn", "c_proj")  # Llama-family and GPT-2 names


@dataclass(frozen=True)
class ModelOptions:
    device: str = "cpu"  # auto | cpu | cuda
    gradient_checkpointing: bool = False  # from load on (the memory planner may also turn it on later)
    lora_rank: int = 0  # 0: full fine-tuning
    lora_alpha: float = 16.0


def resolve_device(name: str) -> str:
    """`auto` is cuda when a GPU is visible, else cpu; asking for cuda without one is a usage error."""
    if name not in DEVICES:
        raise UserError(f"unknown device {name!r}; use one of {', '.join(DEVICES)}")
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda but torch sees no GPU; use --device cpu or auto")
    return name


def load(path: str, options: ModelOptions = ModelOptions(), *, dtype: torch.dtype | None = None
         ) -> tuple[torch.nn.Module, object]:
    """A causal LM from a Hugging Face directory on the options' device, and its tokenizer.
    `dtype` None: the trained weights' dtype of `precision.plan` for that device and checkpoint."""
    device = resolve_device(options.device)
    if dtype is None:
        dtype = precision.plan(device, precision.checkpoint_dtype(path), lora=bool(options.lora_rank)).weights
    model, tokenizer = load_causal_lm(path, device=device, dtype=dtype)
    if options.gradient_checkpointing:
        enable_checkpointing(model)
    if options.lora_rank:
        model = with_lora(model, options.lora_rank, options.lora_alpha)
    return model.eval(), tokenizer


def enable_checkpointing(model: torch.nn.Module) -> None:
    """Recompute the layers' activations in the backward (also on a loaded, LoRA-wrapped model)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    inner.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    inner.config.use_cache = True  # the sampler and the shared-prompt loss still use the KV cache
    model.eval()


def with_lora(model: torch.nn.Module, rank: int, alpha: float) -> torch.nn.Module:
    """Wrap `model` in peft LoRA adapters on its attention projections (base weights frozen)."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise UserError("--lora-rank needs peft: pip install 'vpo-evo[lora]'") from None
    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    targets = [t for t in LORA_TARGETS if t in names]
    if not targets:
        raise UserError(f"no attention projection named one of {', '.join(LORA_TARGETS)} in this model for LoRA")
    return get_peft_model(model, LoraConfig(r=rank, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0))


def merged_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) pairs of the plain transformers model's state dict, LoRA merged one layer
    at a time (base weight + the adapter's delta; never a copy of the whole model). For a
    model without adapters, its own state dict."""
    if not hasattr(model, "merge_and_unload"):
        yield from model.state_dict().items()
        return
    from peft.tuners.lora import LoraLayer

    inner = model.get_base_model()
    lora = {name: module for name, module in inner.named_modules() if isinstance(module, LoraLayer)}
    for name, tensor in inner.state_dict().items():
        if "lora_" in name:
            continue
        owner, _, leaf = name.replace(".base_layer.", ".").rpartition(".")
        layer = lora.get(owner)
        if layer is not None and leaf == "weight":
            with torch.no_grad():
                tensor = tensor + sum(layer.get_delta_weight(a) for a in layer.active_adapters).to(tensor.dtype)
        yield name.replace(".base_layer.", "."), tensor


@contextlib.contextmanager
def adapters_off(model: torch.nn.Module, off: bool = True) -> Iterator[None]:
    """Within the block a LoRA model computes as its frozen base (the KL reference of a LoRA
    run, without a second copy of the model); a no-op for a model without adapters or `off` False."""
    if off and hasattr(model, "disable_adapter"):
        with model.disable_adapter():
            yield
    else:
        yield


def merged(model: torch.nn.Module) -> torch.nn.Module:
    """The plain transformers model to save or push into vLLM (LoRA merged into a copy)."""
    if hasattr(model, "merge_and_unload"):
        return copy.deepcopy(model).merge_and_unload()
    return model


def autocast(device: str, enabled: bool):
    """bfloat16 autocast on the model's device type (weights stay float32)."""
    return torch.autocast("cuda" if str(device).startswith("cuda") else "cpu", dtype=torch.bfloat16, enabled=enabled)
