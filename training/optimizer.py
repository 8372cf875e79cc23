"""The AdamW a run updates with, and the memory its step takes beyond the weights, gradients
and moments.

torch's default AdamW on CUDA is the `foreach` one: its step allocates a transient float32
copy of every parameter at once (11.5 GiB at Qwen2.5-3B's size, measured on an H100). The
fused kernel allocates nothing and is 2.6x faster there, so a CUDA run uses it where torch has
it; elsewhere the step runs tensor by tensor (`foreach=False`, torch's default on the CPU),
whose transients are two temporaries of the largest parameter (the denominator and its square
root). `step_bytes` is that model; the memory plan adds it to the step's peak.

    >>> optimizer = adamw(model.parameters(), lr=1e-6, weight_decay=0.01)
    >>> step_bytes(optimizer)   # 0 for the fused kernel
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

STEP_TEMPORARIES = 2  # tensor by tensor: the denominator and the square root it is made from, of one parameter


def fused_available(parameters: list[torch.Tensor]) -> bool:
    """Whether torch's fused AdamW takes these parameters (all on CUDA, floating point)."""
    return bool(parameters) and all(p.is_cuda and p.is_floating_point() for p in parameters)


def adamw(parameters: Iterable[torch.Tensor], *, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW over `parameters` (those that require a gradient): fused on CUDA, tensor by tensor elsewhere."""
    trained = [p for p in parameters if p.requires_grad]
    if fused_available(trained):
        try:
            return torch.optim.AdamW(trained, lr=lr, weight_decay=weight_decay, fused=True)
        except (RuntimeError, TypeError):  # a torch without the fused kernel for this device or dtype
            pass
    return torch.optim.AdamW(trained, lr=lr, weight_decay=weight_decay, foreach=False)


def load(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Load a saved optimizer state, keeping this optimizer's kernel choice (a state saved on
    another device carries that device's `fused` / `foreach`)."""
    kernels = [{key: group.get(key) for key in ("fused", "foreach")} for group in optimizer.param_groups]
    optimizer.load_state_dict(state)
    for group, kernel in zip(optimizer.param_groups, kernels):
        group.update(kernel)


def step_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes the optimizer's step allocates for a moment beyond the weights, gradients and
    moments: 0 fused; a copy of every parameter for `foreach`; STEP_TEMPORARIES of the largest
    parameter tensor by tensor."""
    largest, total, fused, foreach = 0, 0, True, False
    for group in optimizer.param_groups:
        sizes = [p.numel() * p.element_size() for p in group["params"]]
        largest, total = max([largest, *sizes]), total + sum(sizes)
        fused = fused and bool(group.get("fused"))
        foreach = foreach or bool(group.get("foreach")) or (group.get("foreach") is None and not group.get("fused")
                                                           and any(p.is_cuda for p in group["params"]))
    if fused:
        return 0
    return total if foreach else STEP_TEMPORARIES * largest
