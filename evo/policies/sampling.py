"""Pure sampling helpers over logits: temperature, nucleus (top-p) truncation, stop strings."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from evo.policies.options import GREEDY_BELOW


def top_p_filter(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Set to -inf every logit outside the smallest set whose probability reaches `top_p`.

    The most likely token is always kept. `logits` is [B, V]; returns a new tensor.
    """
    if top_p >= 1.0:
        return logits
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs
    sorted_logits = sorted_logits.masked_fill(mass_before >= top_p, float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)


def sample_next(
    logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one token per row; return (token ids [B], log-probabilities [B]).

    The log-probability is under the distribution actually sampled from (temperature, then
    top-p renormalised). Temperature 0 (or below GREEDY_BELOW, as in vLLM, where logits / T
    would overflow) is greedy and reports the model's own log-probability.
    """
    logits = logits.float()
    if temperature < GREEDY_BELOW:
        logp = logits.log_softmax(dim=-1)
        tokens = logp.argmax(dim=-1)
        return tokens, logp.gather(-1, tokens[:, None])[:, 0]
    logp = top_p_filter(logits / temperature, top_p).log_softmax(dim=-1)
    # Exponential race: argmax p_i / E_i with E_i ~ Exp(1) draws i with probability p_i.
    race = torch.empty_like(logp).exponential_(generator=generator)
    tokens = (logp.exp() / race).argmax(dim=-1)
    return tokens, logp.gather(-1, tokens[:, None])[:, 0]


def first_stop(text: str, stop: Sequence[str]) -> int:
    """Index in `text` where the earliest stop string begins, or -1."""
    hits = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return min(hits) if hits else -1


def tokens_through_stop(ids: Sequence[int], cut: int, stop: Sequence[str],
                        decode: Callable[[Sequence[int]], str]) -> int:
    """The fewest leading tokens of `ids` whose decoded text already contains a stop string
    beginning at character `cut` (the token that completes the stop string is kept)."""
    need = cut + min(len(s) for s in stop if s and decode(ids).startswith(s, cut))
    lo, hi = 1, len(ids)
    while lo < hi:  # decoded length grows with the number of tokens
        mid = (lo + hi) // 2
        if len(decode(ids[:mid])) >= need:
            hi = mid
        else:
            lo = mid + 1
    return lo
