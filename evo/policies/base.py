"""The Policy protocol: one batched method shared by search and training."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Completion:
    text: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] | None = None  # one per token id, under the sampling distribution
    finish_reason: str = "stop"  # "stop" (eos or stop string) | "length" (hit max_new_tokens)


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
        """Return, for each prompt, `n` completions (the prompt text is not included)."""
        ...
