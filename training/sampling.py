"""Batched sampling from an in-memory causal LM for training rollouts.

Prompts are prefilled once and their KV cache repeated for the `n` rollouts of each prompt;
then one token per step for all rows. Position ids follow the attention mask, so left-padded
prompts see the same positions as unpadded ones (the trainer's forward uses the same rule).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache


@dataclass(frozen=True)
class Samples:
    prompt_ids: torch.Tensor  # (B, P) left-padded
    prompt_mask: torch.Tensor  # (B, P)
    completion_ids: torch.Tensor  # (B * n, L) right-padded; rows of one prompt are adjacent
    completion_mask: torch.Tensor  # (B * n, L) 1 on generated tokens up to and including eos
    finished: torch.Tensor  # (B * n,) True when the row emitted eos within the budget


def positions(mask: torch.Tensor) -> torch.Tensor:
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def pick(logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator) -> torch.Tensor:
    """One token per row from logits (N, V): temperature, nucleus (top_p), seeded multinomial."""
    if temperature <= 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        drop = sorted_probs.cumsum(-1) - sorted_probs > top_p
        sorted_probs = sorted_probs.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def sample(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    *,
    n: int,
    max_new_tokens: int,
    eos_id: int,
    pad_id: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
) -> Samples:
    """`n` completions for each left-padded prompt row, with a KV cache shared by the prompt."""
    generator = torch.Generator(device=prompt_ids.device).manual_seed(seed)
    cache = DynamicCache()
    out = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions(prompt_mask),
                cache=cache, use_cache=True)
    cache.batch_repeat_interleave(n)
    logits = out.logits[:, -1].repeat_interleave(n, dim=0)
    mask = prompt_mask.repeat_interleave(n, dim=0)
    rows = mask.shape[0]
    done = torch.zeros(rows, dtype=torch.bool, device=prompt_ids.device)
    tokens, alive = [], []
    for _ in range(max_new_tokens):
        token = pick(logits, temperature, top_p, generator).masked_fill(done, pad_id)
        tokens.append(token)
        alive.append(~done)
        done = done | (token == eos_id)
        if bool(done.all()) or len(tokens) == max_new_tokens:
            break
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        position = positions(mask)[:, -1:]
        out = model(input_ids=token[:, None], attention_mask=mask, position_ids=position,
                    cache=cache, use_cache=True)
        logits = out.logits[:, -1]
    return Samples(prompt_ids, prompt_mask, torch.stack(tokens, 1), torch.stack(alive, 1).long(), done)
