"""Token log-probabilities and the PPO-clip loss (token sums normalized by a constant)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from evo.policies.local import Rollout


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that follow the attention mask (left padding), as the sampler uses."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


def token_logprobs(model: torch.nn.Module, samples: Rollout, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities (len(rows), T) of the sampled tokens, and every token's (for entropy)."""
    prompt_ids, prompt_mask = samples.prompt_ids[rows], samples.prompt_mask[rows]
    completion = samples.completion_ids[rows]
    ids = torch.cat([prompt_ids, completion], dim=1)
    mask = torch.cat([prompt_mask, torch.ones_like(completion)], dim=1)
    start = prompt_ids.shape[1] - 1
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits[:, start:-1].float()
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(-1, completion[..., None]).squeeze(-1), logp


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
) -> LossParts:
    """PPO-clip over tokens; per-token losses are summed and divided by a constant, so a
    rollout's weight does not depend on its length (no per-sequence averaging)."""
    ratio = torch.exp(logp - old_logp)
    a = advantages[:, None]
    clipped_ratio = ratio.clamp(1 - eps_low, 1 + eps_high)
    per_token = -torch.min(ratio * a, clipped_ratio * a)
    kl_sum = 0.0
    if ref_logp is not None:
        delta = ref_logp - logp
        k3 = torch.exp(delta) - delta - 1
        per_token = per_token + kl_coef * k3
        kl_sum = float((k3.detach() * mask).sum())
    loss = (per_token * mask).sum() / normalizer
    with torch.no_grad():
        active = ((ratio * a) > (clipped_ratio * a)).float()
        entropy = -(all_logp.exp() * all_logp).sum(-1)
    return LossParts(loss, float((active * mask).sum()), float((entropy * mask).sum()), kl_sum)
