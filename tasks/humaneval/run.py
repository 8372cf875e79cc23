"""Run a candidate program on test snippets, each in a forked process with a wall-clock
timeout: one pass/fail per test.

This is the one place that executes candidate code for the humaneval task. Each test runs
in its own child (forked from the caller, so the caller never executes the candidate):
a new session and process group, stdin/stdout/stderr on /dev/null, a CPU-time limit, no
core dumps. The child runs `program` then the snippet in one fresh namespace and reports
a pass by writing one byte to a pipe, so a candidate that exits early (`os._exit(0)`,
`sys.exit`) fails. At the deadline the child's whole process group is killed; a test that
is killed, raises or exits without writing fails. (A candidate that goes out of its way to
forge the byte can pass, as in any harness that runs it in the scorer's process tree.)
Inside `evo check` / `evo run` this runs within the sandbox's evaluation process, so the
children also get its namespaces, uid and limits.
"""

from __future__ import annotations

import math
import os
import resource
import select
import signal
import time
from collections.abc import Sequence

PASS = b"1"


def run_tests(program: str, tests: Sequence[str], timeout: float) -> list[bool]:
    """Whether `program` followed by each snippet runs to the end (no exception) within `timeout` s."""
    try:
        code = compile(program, "candidate.py", "exec")
    except (SyntaxError, ValueError):
        return [False] * len(tests)
    return [_one(code, test, timeout) for test in tests]


def _one(code, test: str, timeout: float) -> bool:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child never returns
        os.close(read)
        _child(code, test, write, timeout)
    os.close(write)
    try:
        return _wait_for_pass(read, timeout)
    finally:
        os.close(read)
        for kill, target in ((os.killpg, pid), (os.kill, pid)):  # its group; itself, if not yet a leader
            try:
                kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        os.waitpid(pid, 0)


def _wait_for_pass(fd: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            return os.read(fd, 1) == PASS
    return False


def _child(code, test: str, write: int, timeout: float) -> None:
    status = 1
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(null, target)
        # Nothing but the pass pipe and /dev/null: the caller's other descriptors (inside the
        # sandbox, the scorer's result channel) are out of the candidate's reach.
        os.closerange(3, write)
        os.closerange(write + 1, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 65536)
        cpu = math.ceil(timeout) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        namespace = {"__name__": "candidate"}  # an `if __name__ == "__main__":` block does not run
        exec(code, namespace)
        exec(compile(test, "test.py", "exec"), namespace)
        os.write(write, PASS)
        status = 0
    except BaseException:
        pass
    finally:
        os._exit(status)
