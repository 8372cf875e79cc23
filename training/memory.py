"""Memory of a training step, measured: the accelerator's allocator on CUDA; on CPU the
process's resident set (Linux resets its peak through /proc/self/clear_refs; elsewhere the
CPU peak is the process's high-water mark, which never goes down)."""

from __future__ import annotations

import re
import resource
import sys
from pathlib import Path

import torch

GIB = 1 << 30
STATUS, CLEAR_REFS, MEMINFO = Path("/proc/self/status"), Path("/proc/self/clear_refs"), Path("/proc/meminfo")


def reset_peak(device: torch.device | str) -> None:
    """Start a new peak (on CPU where Linux allows it)."""
    if str(device).startswith("cuda"):
        torch.cuda.reset_peak_memory_stats(device)
        return
    _trim()
    try:
        CLEAR_REFS.write_text("5")  # resets VmHWM to the current resident set (Linux >= 4.0)
    except OSError:
        pass


def _trim() -> None:
    """Hand the C heap's free pages back to the OS (glibc), so the resident set is what is in use."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _proc_bytes(path: Path, key: str) -> int | None:
    """A `KEY:  N kB` line of a /proc file, in bytes (None where there is no such file or line)."""
    try:
        found = re.search(rf"^{key}:\s+(\d+) kB", path.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(found.group(1)) * 1024 if found else None


def current_bytes(device: torch.device | str) -> int:
    """Bytes held now: CUDA memory allocated, or the process's resident set on CPU (after a trim)."""
    if str(device).startswith("cuda"):
        return torch.cuda.memory_allocated(device)
    _trim()
    rss = _proc_bytes(STATUS, "VmRSS")
    return rss if rss is not None else peak_bytes(device)


def peak_bytes(device: torch.device | str) -> int:
    """Bytes held at most since `reset_peak`: CUDA allocator, or the process's peak resident set."""
    if str(device).startswith("cuda"):
        return torch.cuda.max_memory_allocated(device)
    hwm = _proc_bytes(STATUS, "VmHWM")
    if hwm is not None:
        return hwm
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak if sys.platform == "darwin" else peak * 1024


def peak_gib(device: torch.device | str) -> float:
    """`peak_bytes` in GiB."""
    return peak_bytes(device) / GIB


def held_bytes(device: torch.device | str) -> int:
    """What this process holds of the device: torch's CUDA reservation (a vLLM engine in this
    process included, asleep or not: its sleep unmaps memory the allocator still counts), or the
    resident set on CPU."""
    if str(device).startswith("cuda"):
        return torch.cuda.memory_reserved(device)
    return current_bytes(device)


def release_cache(device: torch.device | str) -> None:
    """Hand the CUDA allocator's cached, unused blocks back to the device (before vLLM wakes:
    its engine allocates outside torch's cache and sees only what the device has free)."""
    if str(device).startswith("cuda"):
        torch.cuda.empty_cache()


def free_bytes(device: torch.device | str) -> int:
    """What the device could still give this process: free CUDA memory plus what the allocator
    holds for it, or the machine's available memory plus the resident set on CPU."""
    if str(device).startswith("cuda"):
        free, _ = torch.cuda.mem_get_info(device)
        return free + held_bytes(device)
    available = _proc_bytes(MEMINFO, "MemAvailable")
    return (available if available is not None else 1 << 40) + held_bytes(device)
