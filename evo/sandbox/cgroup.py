"""One memory cgroup per zygote, joined by each evaluation's candidate process: a limit on
the memory of everything the candidate starts, together (forked children, System V and
/dev/shm segments, tmpfs files), which per-process RLIMIT_AS cannot give. cgroup v2 where
the memory controller is enabled for us, else v1's memory hierarchy; None where neither is
writable (not root, no memory controller): the sandbox then relies on its fallback (see
docs/sandbox.md)."""

from __future__ import annotations

import os
import time

_V2, _V1 = "/sys/fs/cgroup", "/sys/fs/cgroup/memory"


def _own(hierarchy: str) -> str | None:
    """This process's cgroup path in a hierarchy ('' = v2's), from /proc/self/cgroup."""
    with open("/proc/self/cgroup") as lines:
        for line in lines:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if controllers == hierarchy or hierarchy in controllers.split(","):
                return path
    return None


def _base() -> tuple[str, str] | None:
    """(directory our cgroups go under, 'v1' | 'v2'), or None."""
    v2 = _own("")
    if v2 is not None and os.path.isfile(f"{_V2}/cgroup.controllers"):
        parent = os.path.join(_V2, v2.lstrip("/"))
        try:
            with open(f"{parent}/cgroup.subtree_control") as file:
                if "memory" in file.read().split():
                    return parent, "v2"
        except OSError:
            pass
    v1 = _own("memory")
    if v1 is not None and os.path.isfile(f"{_V1}/memory.limit_in_bytes"):
        return os.path.join(_V1, v1.lstrip("/")), "v1"
    return None


def zygote_name(pid: int) -> str:
    return f"evo-{pid}"


def path_of(name: str) -> str | None:
    """Where this process's memory cgroup `name` is (or would be), or None."""
    base = _base()
    return os.path.join(base[0], name) if base else None


def create(name: str, limit_bytes: int) -> str | None:
    """A fresh memory cgroup `name` limited to `limit_bytes` (no swap), or None."""
    base = _base() if os.geteuid() == 0 else None
    if base is None:
        return None
    parent, version = base
    path = os.path.join(parent, name)
    files = {"v2": [("memory.max", limit_bytes), ("memory.swap.max", 0)],
             "v1": [("memory.limit_in_bytes", limit_bytes), ("memory.memsw.limit_in_bytes", limit_bytes)]}[version]
    try:
        os.mkdir(path)
        for file, value in files:
            if os.path.exists(f"{path}/{file}"):
                with open(f"{path}/{file}", "w") as handle:
                    handle.write(str(value))
    except OSError:
        remove(path)
        return None
    return path


def join(path: str) -> None:
    with open(f"{path}/cgroup.procs", "w") as file:
        file.write("0")


def oom_kills(path: str | None) -> int:
    """How many processes the kernel killed in `path` for its memory limit so far."""
    if path is None:
        return 0
    for file in ("memory.events", "memory.oom_control"):
        try:
            with open(f"{path}/{file}") as lines:
                for line in lines:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value)
        except OSError:
            continue
    return 0


def remove(path: str, attempts: int = 50) -> None:
    """Remove the cgroup once its last process is gone (they may still be exiting)."""
    for _ in range(attempts):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)
