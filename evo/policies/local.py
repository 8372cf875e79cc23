"""`local:` policy: a Hugging Face causal LM run in-process, sampled by evo.policies.sampler.

`load_causal_lm(path)` is the project's one loader of a Hugging Face directory (the policy,
the trainer's `training.models.load` and the example scripts use it); `LocalPolicy(path)`
wraps the loaded model in a Sampler.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import torch

from evo.errors import UserError
from evo.policies.base import Completion
from evo.policies.prompt_format import PromptFormat
from evo.policies.sampler import Sampler

GENERIC_TOKENIZERS = ("TokenizersBackend", "PreTrainedTokenizerFast")


def load_tokenizer(path: str | Path):
    """The directory's tokenizer. A generic fast tokenizer (tokenizer_config.json says
    TokenizersBackend or PreTrainedTokenizerFast) is loaded as that: transformers 5's
    AutoTokenizer would otherwise rebuild it as the model type's own class (a word-level
    tokenizer beside a Qwen2 config becomes a byte-level BPE)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    declared = Path(path) / "tokenizer_config.json"
    generic = declared.exists() and json.loads(declared.read_text()).get("tokenizer_class") in GENERIC_TOKENIZERS
    return (PreTrainedTokenizerFast if generic else AutoTokenizer).from_pretrained(path)


def load_causal_lm(path: str | Path, *, device: str | torch.device = "cpu",
                   dtype: str | torch.dtype = torch.float32) -> tuple[torch.nn.Module, object]:
    """A causal LM in eval mode on `device` and its tokenizer (pad token: eos when it has
    none), from a Hugging Face directory; a one-line UserError when it cannot be loaded or a
    weights file in it names code (`check_weights`)."""
    from transformers import AutoModelForCausalLM

    from evo.policies.checkpoints import check_weights

    if not (Path(path) / "config.json").exists():
        raise UserError(f"{path} is not a Hugging Face model directory (no config.json)")
    check_weights(Path(path))
    try:
        tokenizer = load_tokenizer(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load a causal LM from {path}: {str(exc).splitlines()[0]}") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.eval(), tokenizer


class LocalPolicy:
    """A Policy over a Hugging Face causal-LM directory (`local:PATH`), prompted as the
    checkpoint was trained (`PromptFormat.of_checkpoint`)."""

    def __init__(self, path: str | Path, device: str | None = None, dtype: str | torch.dtype | None = None) -> None:
        """`dtype` None: float32 on CPU (half precision is slow there), the checkpoint's own on CUDA."""
        device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if dtype is None:
            dtype = "auto" if str(device).startswith("cuda") else torch.float32
        model, tokenizer = load_causal_lm(path, device=device, dtype=dtype)
        self.path = Path(path)
        self.sampler = Sampler(model, tokenizer, prompt_format=PromptFormat.of_checkpoint(path, tokenizer))

    def generate(self, prompts: Sequence[str], *, n: int = 1, max_new_tokens: int = 256, temperature: float = 1.0,
                 top_p: float = 1.0, seed: int | None = None, stop: Sequence[str] = ()) -> list[list[Completion]]:
        return self.sampler.sample(prompts, n=n, max_new_tokens=max_new_tokens, temperature=temperature,
                                   top_p=top_p, seed=seed, stop=stop).completions

    # -- Trainable (evo.policies.base): the sampling model is the one trained ----------------

    def checkpoint(self) -> Path:
        return self.path

    def encode(self, prompts: Sequence[str]) -> list[list[int]]:
        return self.sampler.encode(prompts)

    def trainee(self) -> tuple[torch.nn.Module, object]:
        return self.sampler.model, self.sampler.tokenizer

    def push(self, model: torch.nn.Module) -> None:
        """Nothing when `model` is the sampling model; else (float32 masters of a 16-bit sampling
        model) its weights are copied in, rounded to the sampling model's dtype."""
        if model is not self.sampler.model:
            self.sampler.model.load_state_dict(model.state_dict())
