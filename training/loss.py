"""Token log-probabilities and the PPO-clip loss (token sums normalized by a constant)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from evo.policies.sampler import Rollout, cache_argument


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that follow the attention mask (left padding), as the sampler uses."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


BUCKET_ROWS = 32  # completions are run in length buckets of about this many rows


def token_logprobs(model: torch.nn.Module, samples: Rollout, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities (len(rows), T) of the sampled tokens, and every token's (for entropy).

    Equal to one forward over prompt + completion per row, but cheaper: each prompt is
    encoded once for all of its rollouts in `rows` (its keys and values are shared, so their
    gradients add up), and the completions run in buckets of similar length, each cut to its
    longest completion. Positions past a completion's end hold zeros."""
    rows = rows.to(samples.completion_ids.device)
    if torch.is_grad_enabled() and checkpointed_layers(model):
        return joint_logprobs(model, samples, rows)
    group = samples.prompt_ids.shape[0] // len(samples.completions)
    prompts, inverse = torch.unique(rows // group, return_inverse=True)
    prompt_ids, prompt_mask = _trim_left(samples.prompt_ids[prompts * group], samples.prompt_mask[prompts * group])
    cache_arg = cache_argument(model)
    prefix = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions(prompt_mask),
                   use_cache=True)
    keys_values = [(layer.keys, layer.values) for layer in getattr(prefix, cache_arg).layers]
    prompt_lengths = prompt_mask.sum(1)
    width = samples.completion_ids.shape[1]
    lengths = samples.completion_mask[rows].sum(1)
    logp = torch.zeros((len(rows), width), device=rows.device)
    all_logp = torch.zeros((len(rows), width, prefix.logits.shape[-1]), device=rows.device)
    for bucket in torch.argsort(lengths, stable=True).tensor_split(max(1, round(len(rows) / BUCKET_ROWS))):
        if len(bucket) == 0:
            continue
        owner, length = inverse[bucket], max(1, int(lengths[bucket].max()))
        completion = samples.completion_ids[rows[bucket], :length]
        logits = prefix.logits[owner, -1:]
        if length > 1:
            cache = DynamicCache(config=model.config)
            for layer, (k, v) in enumerate(keys_values):
                cache.update(k[owner], v[owner], layer)
            mask = torch.cat([prompt_mask[owner], torch.ones_like(completion[:, 1:])], dim=1)
            steps = prompt_lengths[owner, None] + torch.arange(length - 1, device=rows.device)
            rest = model(input_ids=completion[:, :-1], attention_mask=mask, position_ids=steps, **{cache_arg: cache})
            logits = torch.cat([logits, rest.logits], dim=1)
        bucket_logp = torch.log_softmax(logits.float(), dim=-1)
        all_logp[bucket, :length] = bucket_logp
        logp[bucket, :length] = bucket_logp.gather(-1, completion[..., None]).squeeze(-1)
    return logp, all_logp


def checkpointed_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The layers transformers recomputes in the backward (`gradient_checkpointing_enable`)."""
    return [m for m in model.modules() if getattr(m, "gradient_checkpointing", False) is True]


def joint_logprobs(model: torch.nn.Module, samples: Rollout, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`token_logprobs` as one forward over prompt + completion per row, without a KV cache, under
    gradient checkpointing (a recomputed layer cannot share a prompt cache). transformers only
    checkpoints layers in training mode: their own flag is set for the forward, so dropout
    elsewhere stays off as in every other forward of the trainer."""
    prompt_ids, prompt_mask = _trim_left(samples.prompt_ids[rows], samples.prompt_mask[rows])
    completion, keep = samples.completion_ids[rows], samples.completion_mask[rows]
    mask = torch.cat([prompt_mask, torch.ones_like(keep)], dim=1)
    layers = checkpointed_layers(model)
    for layer in layers:
        layer.training = True
    try:
        out = model(input_ids=torch.cat([prompt_ids, completion], dim=1), attention_mask=mask,
                    position_ids=positions(mask), use_cache=False)
    finally:
        for layer in layers:
            layer.training = False
    all_logp = torch.log_softmax(out.logits[:, prompt_ids.shape[1] - 1:-1].float(), dim=-1) * keep[..., None]
    return all_logp.gather(-1, completion[..., None]).squeeze(-1) * keep, all_logp


def _trim_left(ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop the leading columns that are padding in every row."""
    first = int(mask.any(0).long().argmax())
    return ids[:, first:], mask[:, first:]


@dataclass(frozen=True)
class LossParts:
    loss: torch.Tensor  # scalar, already divided by the normalizer
    clipped: float  # number of masked tokens where the clip was active
    entropy: float  # summed token entropy over masked tokens
    kl: float  # summed k3 over masked tokens


def ppo_clip_loss(
    logp: torch.Tensor,
    all_logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float,
    eps_high: float,
    normalizer: float,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    entropy_coef: float = 0.0,
) -> LossParts:
    """PPO-clip over tokens; per-token losses are summed and divided by a constant, so a
    rollout's weight does not depend on its length (no per-sequence averaging).
    `entropy_coef` > 0 subtracts coef * token entropy (the bonus, normalized alike)."""
    ratio = torch.exp(logp - old_logp)
    a = advantages[:, None]
    clipped_ratio = ratio.clamp(1 - eps_low, 1 + eps_high)
    per_token = -torch.min(ratio * a, clipped_ratio * a)
    if entropy_coef:
        per_token = per_token - entropy_coef * token_entropy(all_logp)
    kl_sum = 0.0
    if ref_logp is not None:
        delta = ref_logp - logp
        k3 = torch.exp(delta) - delta - 1
        per_token = per_token + kl_coef * k3
        kl_sum = float((k3.detach() * mask).sum())
    loss = (per_token * mask).sum() / normalizer
    with torch.no_grad():
        active = ((ratio * a) > (clipped_ratio * a)).float()
        entropy = token_entropy(all_logp)
    return LossParts(loss, float((active * mask).sum()), float((entropy * mask).sum()), kl_sum)


def token_entropy(all_logp: torch.Tensor) -> torch.Tensor:
    """Entropy of every token's distribution from its log-probabilities (..., V) -> (...)."""
    return -(all_logp.exp() * all_logp).sum(-1)
