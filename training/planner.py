"""The memory plan of a training step: how many rollout tokens a micro-batch may hold, and
whether layers are recomputed in the backward (gradient checkpointing).

The step's peak is modelled as resident + fixed + token_bytes x tokens, where `tokens` is a
micro-batch's rows x (prompt width + longest completion):
- resident: weights, the KL reference, AdamW's two moments; counted from the parameters;
- fixed and token_bytes: measured once, before step 1, by two probes of the real loss (the
  trainer's `token_logprobs` forward and its backward, under the run's autocast) on 3 and
  8 synthetic rows (after a one-row warm-up: a first backward allocates buffers of its own) of the step's longest length, on the run's device (CUDA: the
  allocator's peak; CPU: the resident set's, `training.memory`). fixed is the gradients and
  the head's logit chunks, token_bytes the activations;
- the optimizer step (after the activations are freed): the gradients plus the step's transient
  (`training.optimizer.step_bytes`: 0 for CUDA's fused AdamW), so the peak is resident +
  max(fixed + token_bytes x tokens, gradients + transient).
The gradients are freed after the step (the trainer's `update`), so sampling, and a vLLM engine
woken for it, share the device with the resident bytes only. `check_states` refuses, before any
sampling, a model whose resident bytes do not fit beside an engine awake for sampling or whose
step does not fit the update's budget, with the ways out that help (LoRA, ZeRO-3 over N GPUs).
The budget is `memory_gib`, else BUDGET_SHARE of what the device can give the process. The
largest micro-batch that fits sets the token budget; each step's rollouts are then cut, in
order (a prompt's rollouts stay together), into micro-batches within it, as veRL's dynamic
batch size does. When fewer than one prompt group's rollouts fit, the plan turns gradient
checkpointing on (unless it was set) and probes again; when one rollout does not fit even
then, training stops with one line before step 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from evo.errors import UserError
from evo.policies.sampler import Rollout
from training import memory
from training.loss import token_logprobs

PROBE_ROWS = (3, 8)  # the two probes' rows (a single row's kernels and copies are not yet linear in rows)
BUDGET_SHARE = 0.9
MIB = 1 << 20


@dataclass(frozen=True)
class MemoryPlan:
    budget_tokens: int  # rows x (prompt width + longest completion) a micro-batch may hold
    checkpointing: bool
    resident_bytes: int  # weights, reference, AdamW moments
    fixed_bytes: int  # per micro-batch whatever its size: gradients, logit chunks
    token_bytes: float  # per micro-batch token: activations
    capacity_bytes: int
    step_bytes: int = 0  # the optimizer step: gradients plus its transient (activations freed by then)

    def peak_bytes(self, tokens: int) -> float:
        return self.resident_bytes + max(self.fixed_bytes + self.token_bytes * tokens, self.step_bytes)

    def split(self, samples: Rollout) -> list[torch.Tensor]:
        """The step's rows, in order, cut into micro-batches of at most `budget_tokens` (a row
        alone over it is a micro-batch of its own)."""
        width = int(samples.prompt_mask.any(0).sum())
        lengths = samples.completion_mask.sum(1).tolist()
        parts, start, longest = [], 0, 0
        for row, length in enumerate(lengths):
            longest_with = max(longest, int(length))
            if row > start and (row - start + 1) * (width + longest_with) > self.budget_tokens:
                parts.append(torch.arange(start, row))
                start, longest_with = row, int(length)
            longest = longest_with
        parts.append(torch.arange(start, len(lengths)))
        return parts

    def line(self, rollouts: int, length: int) -> str:
        rows = max(1, self.budget_tokens // length)
        count = math.ceil(rollouts / rows)
        return (f"memory plan: micro-batches of <= {self.budget_tokens:,} tokens ({min(rows, rollouts)} rollouts of "
                f"{length}; {count} per step at most), gradient checkpointing {'on' if self.checkpointing else 'off'}; "
                f"predicted peak {self.peak_bytes(min(rows, rollouts) * length) / memory.GIB:.2f} GiB of "
                f"{self.capacity_bytes / memory.GIB:.2f} (resident {self.resident_bytes / memory.GIB:.2f}, "
                f"{self.token_bytes / 1024:.1f} KiB a token)")


def _size(params) -> int:
    return sum(p.numel() * p.element_size() for p in params)


def resident_bytes(model: torch.nn.Module, reference: torch.nn.Module | None) -> int:
    """Weights (and the reference's, unless it is the model itself: LoRA's adapters switched
    off) plus AdamW's two moments of every trained parameter."""
    separate = reference is not None and reference is not model
    return _size(model.parameters()) + 2 * gradient_bytes(model) + (_size(reference.parameters())
                                                                     if separate and reference is not None else 0)


def gradient_bytes(model: torch.nn.Module) -> int:
    """The gradients of every trained parameter (one copy each, in the parameter's dtype)."""
    return _size(p for p in model.parameters() if p.requires_grad)


def check_states(model: torch.nn.Module, reference: torch.nn.Module | None, *, capacity: int, step_transient: int,
                 awake: int | None = None) -> None:
    """Before any sampling: a one-line UserError unless the weights, moments and reference
    (`resident_bytes`) fit within `awake` bytes (the room beside a vLLM engine awake for
    sampling; None: no engine) and they and the optimizer step (gradients + `step_transient`)
    fit within `capacity` (the update's budget)."""
    resident, step = resident_bytes(model, reference), gradient_bytes(model) + step_transient
    if awake is not None and resident > awake:
        raise UserError(f"the trainer's weights, AdamW moments and KL reference need {resident / memory.GIB:.2f} GiB "
                        f"while vLLM samples, more than the {awake / memory.GIB:.2f} GiB left beside its engine: "
                        f"{ways_out(model, reference, awake, step_transient)}, or lower the engine's share "
                        "(--vllm-option gpu_memory_utilization=...)")
    if resident + step > capacity:
        raise UserError(f"the weights, AdamW moments, gradients{' and KL reference' if reference is not None else ''} "
                        f"of this {count(model) / 1e9:.2f}B-parameter model need {(resident + step) / memory.GIB:.2f} GiB "
                        f"before any activation, more than the {capacity / memory.GIB:.2f} GiB memory budget: "
                        f"{ways_out(model, reference, capacity, step_transient)}, or raise --memory-gib")


def count(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def ways_out(model: torch.nn.Module, reference: torch.nn.Module | None, capacity: int, step_transient: int) -> str:
    """What would fit: LoRA (a frozen 16-bit base, no full gradients or moments, no second copy
    for the KL reference) and ZeRO-3 (weights, gradients and moments sharded over N GPUs)."""
    lora = count(model) * 2  # the frozen base in bfloat16; the adapters are a rounding error of it
    sharded = resident_bytes(model, reference) + gradient_bytes(model)
    room = max(capacity - step_transient, 1)
    gpus = max(2, math.ceil(sharded / room / 0.8))  # 0.8: room left for activations on each GPU
    return (f"train LoRA adapters (--lora-rank 16: about {lora / memory.GIB:.1f} GiB of frozen bf16 weights), "
            f"or shard the weights, gradients and moments over {gpus} or more GPUs with ZeRO-3 (--engine trl under "
            "training/integrations/accelerate_configs/zero3.yaml)")


def probe_rollout(rows: int, prompt: int, completion: int, device: torch.device) -> Rollout:
    """`rows` rollouts of their own prompts, `prompt` + `completion` tokens each, no padding."""
    def ids(width: int) -> torch.Tensor:
        return (torch.arange(rows * width, device=device).reshape(rows, width) % 7) + 3

    def ones(width: int) -> torch.Tensor:
        return torch.ones((rows, width), dtype=torch.long, device=device)

    return Rollout(ids(prompt), ones(prompt), ids(completion), ones(completion),
                   torch.zeros((rows, completion), device=device), [[] for _ in range(rows)])


def probe(model: torch.nn.Module, rows: int, prompt: int, completion: int, *, entropy: bool,
          autocast: Callable) -> int:
    """Peak bytes above the current ones of a micro-batch's forward and backward, run twice: the
    second adds its gradients to the first's, as every micro-batch after a step's first does."""
    device = next(model.parameters()).device
    samples = probe_rollout(rows, prompt, completion, device)
    model.zero_grad(set_to_none=True)
    before = memory.current_bytes(device)
    memory.reset_peak(device)
    for _ in range(2):
        with autocast():
            logp, ent = token_logprobs(model, samples, torch.arange(rows, device=device), entropy=entropy)
        (logp.sum() + (ent.sum() if ent is not None else 0)).backward()
        del logp, ent
    peak = memory.peak_bytes(device) - before
    model.zero_grad(set_to_none=True)
    return max(0, peak)


def measure(model: torch.nn.Module, prompt: int, completion: int, *, entropy: bool, autocast: Callable
            ) -> tuple[int, float] | None:
    """(fixed bytes, bytes a token) from the PROBE_ROWS probes; None when a probe runs out of memory."""
    few, many = PROBE_ROWS
    try:
        probe(model, 1, prompt, completion, entropy=entropy, autocast=autocast)  # first-call buffers are not a row's cost
        low = probe(model, few, prompt, completion, entropy=entropy, autocast=autocast)
        high = probe(model, many, prompt, completion, entropy=entropy, autocast=autocast)
    except torch.OutOfMemoryError:
        model.zero_grad(set_to_none=True)
        return None
    token = max(1.0, (high - low) / ((many - few) * (prompt + completion)))
    return max(0, int(low - token * few * (prompt + completion))), token


def plan(model: torch.nn.Module, reference: torch.nn.Module | None, *, rollouts: int, group: int, prompt: int,
         completion: int, capacity: int, checkpointing: bool | None, entropy: bool, autocast: Callable,
         enable_checkpointing: Callable[[], None], step_transient: int = 0) -> MemoryPlan:
    """The plan of a step of `rollouts` rows of `prompt` + `completion` tokens within `capacity`
    bytes; `checkpointing` None: turned on (through `enable_checkpointing`) when fewer than
    `group` rows fit without it. `step_transient`: what the optimizer step allocates beyond the
    gradients (`training.optimizer.step_bytes`)."""
    length = prompt + completion
    check_states(model, reference, capacity=capacity, step_transient=step_transient)
    resident = resident_bytes(model, reference)
    if checkpointing:
        enable_checkpointing()
    measured = measure(model, prompt, completion, entropy=entropy, autocast=autocast)
    def fits(m: tuple[float, float] | None) -> int:
        """Tokens that fit beside the resident bytes under the measured (fixed, per-token) cost."""
        return int((capacity - resident - m[0]) // m[1]) if m and capacity > resident + m[0] else 0

    if checkpointing is None and fits(measured) < min(group, rollouts) * length:
        enable_checkpointing()
        measured, checkpointing = measure(model, prompt, completion, entropy=entropy, autocast=autocast), True
    if fits(measured) < length:
        need = "" if measured is None else f" needs {(resident + measured[0] + measured[1] * length) / memory.GIB:.2f} GiB,"
        raise UserError(f"one rollout of {length} tokens{need} more than the {capacity / memory.GIB:.2f} GiB memory budget; "
                        f"lower --max-new-tokens{'' if checkpointing else ', turn on --gradient-checkpointing'}, "
                        f"{ways_out(model, reference, capacity, step_transient)}, or raise --memory-gib")
    assert measured is not None  # fits(None) is 0: the budget check above raised
    fixed, token = measured
    return MemoryPlan(fits(measured), bool(checkpointing), resident, fixed, token, capacity,
                      gradient_bytes(model) + step_transient)
