"""The memory plan of a training step: how many rollout tokens a micro-batch may hold, and
whether layers are recomputed in the backward (gradient checkpointing).

The step's peak is modelled as resident + fixed + token_bytes x tokens, where `tokens` is a
micro-batch's rows x (prompt width + longest completion):
- resident: weights, the KL reference, AdamW's two moments; counted from the parameters;
- fixed and token_bytes: measured once, before step 1, by two probes of the real loss (the
  trainer's `token_logprobs` forward and its backward, under the run's autocast) on 3 and
  8 synthetic rows (after a one-row warm-up: a first backward allocates buffers of its own) of the step's longest length, on the run's device (CUDA: the
  allocator's peak; CPU: the resident set's, `training.memory`). fixed is the gradients and
  the head's logit chunks, token_bytes the activations.
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

    def peak_bytes(self, tokens: int) -> float:
        return self.resident_bytes + self.fixed_bytes + self.token_bytes * tokens

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


def resident_bytes(model: torch.nn.Module, reference: torch.nn.Module | None) -> int:
    """Weights (and the reference's) plus AdamW's two moments of every trained parameter."""
    def size(params) -> int:
        return sum(p.numel() * p.element_size() for p in params)

    trained = [p for p in model.parameters() if p.requires_grad]
    return size(model.parameters()) + 2 * size(trained) + (size(reference.parameters()) if reference is not None else 0)


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
         enable_checkpointing: Callable[[], None]) -> MemoryPlan:
    """The plan of a step of `rollouts` rows of `prompt` + `completion` tokens within `capacity`
    bytes; `checkpointing` None: turned on (through `enable_checkpointing`) when fewer than
    `group` rows fit without it."""
    length = prompt + completion
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
                        "lower --max-new-tokens, use --lora-rank, or raise --memory-gib")
    assert measured is not None  # fits(None) is 0: the budget check above raised
    fixed, token = measured
    return MemoryPlan(fits(measured), bool(checkpointing), resident, fixed, token, capacity)
