"""The Policy protocol: one batched method shared by search and training; and Trainable, the
capability of a policy whose weights this process can train (`evo run --train`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from evo.errors import UserError


FINISH_REASONS = ("stop", "length")  # eos or a stop string; hit max_new_tokens (every policy maps to one)


@dataclass(frozen=True)
class Completion:
    text: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] | None = None  # one per token id, under the sampling distribution
    finish_reason: str = "stop"  # one of FINISH_REASONS


@runtime_checkable
class Policy(Protocol):
    def generate(
        self,
        prompts: Sequence[str],
        *,
        n: int = 1,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        stop: Sequence[str] = (),
    ) -> list[list[Completion]]:
        """Return, for each prompt, `n` completions (the prompt text is not included): a list
        of len(prompts) lists of exactly `n` Completion objects whose `text` is a str. The loop
        refuses anything else (check_replies), more completions than `n` included."""
        ...


class BadReplies(UserError, TypeError, ValueError):
    """A policy's `generate` returned something other than the Policy contract's shape: catch it
    as UserError (the CLI's one line), TypeError (a wrong type) or ValueError (a wrong count)."""


CONTRACT = "a list of one list per prompt, each of exactly n Completion objects (evo.policies.Completion, text a str)"


def check_replies(replies: Any, prompts: int, n: int, policy: str = "the policy") -> list[list[Completion]]:
    """`replies` when it is what `generate` must return for `prompts` prompts and `n` completions
    each, else BadReplies saying what it must return and what it got (extra completions are
    refused, not cut: a policy that returns more than asked has misread the call)."""
    def bad(got: str) -> BadReplies:
        return BadReplies(f"{policy}: generate() must return {CONTRACT}, for {prompts} prompts and n={n}; {got}"[:500])

    if not isinstance(replies, (list, tuple)):
        raise bad(f"it returned {_kind(replies)}")
    if len(replies) != prompts:
        raise bad(f"it returned {len(replies)} lists")
    for i, row in enumerate(replies):
        if not isinstance(row, (list, tuple)):
            raise bad(f"prompt {i}'s entry is {_kind(row)}")
        if len(row) != n:
            raise bad(f"prompt {i}'s list holds {len(row)} completions")
        for j, completion in enumerate(row):
            if not isinstance(completion, Completion):
                raise bad(f"prompt {i}'s completion {j} is {_kind(completion)}")
            if not isinstance(completion.text, str):
                raise bad(f"prompt {i}'s completion {j} has a text of {_kind(completion.text)}")
    return [list(row) for row in replies]


def _kind(value: Any) -> str:
    """A short description of a wrong value: its type and the start of its repr."""
    text = repr(value)
    return f"{type(value).__name__} {text[:40] + '...' if len(text) > 40 else text}"


@runtime_checkable
class Trainable(Protocol):
    """A policy this process can train (`local:`, `vllm:`, `openai:...;train=PATH`; a new backend that can train
    implements these): the checkpoint it was loaded from, the prompt encoder it samples with,
    the torch model a trainer updates, and how the updated weights reach its sampling."""

    def checkpoint(self) -> Path:
        """The Hugging Face directory it was loaded from (the start of training, the KL reference)."""
        ...

    def encode(self, prompts: Sequence[str]) -> list[list[int]]:
        """The token ids `generate` samples from for these prompt texts (in the checkpoint's
        prompt format, evo.policies.prompt_format)."""
        ...

    def trainee(self) -> tuple[Any, Any]:
        """(torch model, tokenizer) to train: the sampling model itself, or a torch copy of the
        checkpoint on the device the policy samples on. A trainer keeps float32 master weights
        (training/precision.py): of a 16-bit model it trains a float32 copy beside it."""
        ...

    def push(self, model: Any) -> None:
        """Sample with `model`'s weights from now on: nothing to do when it is the sampling model;
        float32 masters of a 16-bit sampling model are copied into it (rounded to its dtype), a
        copy's weights are sent to the engine."""
        ...
