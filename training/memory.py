"""Peak memory of a training step: the accelerator's allocator on CUDA, the process's peak
resident set on CPU (a high-water mark of the whole process: it never goes down)."""

from __future__ import annotations

import resource
import sys

import torch

GIB = 1 << 30


def reset_peak(device: torch.device | str) -> None:
    """Start a new peak on CUDA (the CPU figure cannot be reset)."""
    if str(device).startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(device)


def peak_gib(device: torch.device | str) -> float:
    """GiB: CUDA memory allocated at most since `reset_peak`; on CPU the process's peak RSS."""
    if str(device).startswith("cuda"):
        return torch.cuda.max_memory_allocated(device) / GIB
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / GIB if sys.platform == "darwin" else peak * 1024 / GIB
