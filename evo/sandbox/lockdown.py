"""What every process that runs candidate code does to itself before the candidate runs
(the candidate's own process with isolation "process", the scorer's with "shared"):
parent-death signal, a fresh IPC namespace with small System V limits (as root), the
evaluation's memory cgroup, resource limits, a minimal environment, no new privileges, a
private uid with no capabilities at all, and the seccomp filter (no Unix sockets; no IP
sockets either without a network namespace; no symbolic or hard links)."""

from __future__ import annotations

import os
import signal
from typing import Any

from evo.sandbox import cgroup, isolation

# the environment a candidate gets (plus [sandbox] env); HOME, TMPDIR, USER and LOGNAME
# are set to the evaluation's own
ENV_ALLOWED = (
    "PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_NUMERIC", "LC_MESSAGES", "TZ", "TERM",
    "PYTHONPATH", "PYTHONHASHSEED", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV",
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
)


def minimal_env(environ: dict[str, str], extra: tuple[str, ...] = ()) -> dict[str, str]:
    return {name: value for name, value in environ.items() if name in ENV_ALLOWED or name in extra}


def enter_view(view: int | None) -> None:
    """Into the zygote's mount namespace for candidates, when it has one (see
    mounts.private_view): it shows the Python installation even where it lies in a
    private home (which no capability lets the candidate read)."""
    if view is not None:
        isolation.setns(view, isolation.CLONE_NEWNS)
        os.close(view)


def candidate_process(config: dict[str, Any]) -> None:
    """Confine this process (single-threaded, still root when the sandbox is) for a candidate."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    isolation.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.geteuid() == 0:
        try:
            isolation.unshare(isolation.CLONE_NEWIPC)  # SysV objects die with this evaluation
        except OSError:
            pass  # (root without CAP_SYS_ADMIN: the memory limit still counts SysV segments)
        else:
            isolation.limit_sysv(config["memory_mb"] << 20)  # (only ever in our own namespace)
    if config.get("cgroup"):
        cgroup.join(config["cgroup"])
    isolation.set_limits(config["address_space"], config["cpu_limit"], config["nproc"], config["file_bytes"])
    isolation.prctl(isolation.PR_SET_NO_NEW_PRIVS, 1)
    if config["candidate_user"] is not None:
        uid, gid = config["candidate_user"]
        isolation.drop_privileges(uid, gid, keep=None)
    isolation.seccomp_sockets(inet=config["block_network"], links=True)
