"""The candidate's process (isolation "process"): forked by the zygote next to each
evaluation's scorer process, it locks itself down (lockdown.py), then loads the candidate
when the scorer asks and runs its functions, one request at a time, over two pipes. It
holds no descriptor but those pipes and its output: it cannot reach the result channel, and
everything it sends is checked by the scorer's side (candidate.py).

`{"fork": seconds}` (candidate.CandidateModule.fresh) forks a copy of this process, with
the candidate as loaded: the copy answers the next calls, until `{"end": true}`; this
process waits for the copy's exit, at most `seconds`, kills it at the deadline, and then
writes `{"ended": "exit" | "timeout"}`. So each HumanEval test runs on a fresh candidate,
under its own time limit, and the scorer still judges every value the copy returns."""

from __future__ import annotations

import importlib.util
import math
import os
import signal
import sys
import time
from typing import Any

from evo.sandbox import isolation, lockdown, protocol
from evo.sandbox.candidate import describe
from evo.sandbox.child import enter_workdir, own_fds
from evo.sandbox.values import Unsendable, pack, unpack

REQUESTS, REPLIES = 3, 4
REQUEST_LIMIT = 256 << 20
_exit, _send, _recv = os._exit, protocol.send, protocol.recv  # bound now: the candidate may patch modules


class CallbackError(Exception):
    """The scorer's function, called by the candidate, raised (the message says what)."""


def run(fds: tuple[int, int, int], config: dict[str, Any]) -> None:
    """Lock down, serve the scorer's requests, exit (never returns)."""
    try:
        requests, replies, output = fds
        own_fds({0: os.open(os.devnull, os.O_RDONLY), 1: output, 2: output, REQUESTS: requests, REPLIES: replies})
        lockdown.candidate_process(config)
        _serve()
    finally:
        _exit(0)


def _serve() -> None:
    module, copy = None, False
    reply: dict | None
    while True:
        try:
            request = _recv(REQUESTS, None, REQUEST_LIMIT, True)
        except protocol.Closed:
            return
        if "load" in request:
            module, reply = _load(request["load"])
        elif "fork" in request:
            reply, copy = _fork(request["fork"], copy)
            if reply is None:
                continue
        elif "end" in request:
            if copy:
                return
            reply = {"error": ["exception", "no fresh copy to end"]}
        else:
            reply = _call(module, request)
        _flush()
        try:
            message = protocol.encode(reply, True)
        except (ValueError, TypeError, RecursionError, OverflowError) as error:
            message = protocol.encode({"error": ["bad_output", f"the answer cannot be sent: {error}"]})
        view = memoryview(message)
        while view:
            view = view[os.write(REPLIES, view):]


def _fork(seconds: Any, copy: bool) -> tuple[dict | None, bool]:
    """(The reply, whether this process is now the copy.) This process answers that the copy
    exists (the copy: None, nothing to send), then, once the copy has ended, `{"ended": ...}`."""
    if copy or not (isinstance(seconds, (int, float)) and 0 < seconds < math.inf):
        return {"error": ["exception", "fresh copies are not nested and need a time limit"]}, copy
    _flush()
    try:
        pid = os.fork()
    except OSError as error:
        return {"error": ["exception", f"cannot fork a fresh copy: {error}"]}, False
    if pid == 0:
        os.setpgid(0, 0)  # (its own group: killed at the deadline with what it started)
        isolation.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL)
        return None, True  # (this process answered the fork: the copy is ready when it reads the next request)
    _send(REPLIES, {"ok": None}, True)
    pidfd = os.pidfd_open(pid)
    ended = "exit" if protocol.wait_readable([pidfd], time.monotonic() + seconds) else "timeout"
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass
    os.waitpid(pid, 0)
    os.close(pidfd)
    return {"ended": ended}, False


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


def _load(path: str) -> tuple[Any, dict]:
    try:
        enter_workdir(os.path.dirname(path))
        spec = importlib.util.spec_from_file_location("candidate", path)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        names = [n for n in vars(module) if not n.startswith("_") and callable(vars(module)[n])]
        return module, {"ok": names[:10000]}
    except BaseException as error:  # the candidate may raise anything, even SystemExit
        return None, {"error": _failure(error)}


def _call(module: Any, request: dict) -> dict:
    try:
        function = getattr(module, request["call"])
        args, kwargs = unpack(request["args"], _callback), unpack(request["kwargs"], _callback)
        return {"ok": pack(function(*args, **kwargs))}
    except Unsendable as error:
        return {"error": ["bad_output", f"the candidate returned {error}, which cannot leave its process"]}
    except BaseException as error:
        return {"error": _failure(error)}


def _failure(error: BaseException) -> list[str]:
    kind = "memory" if isinstance(error, MemoryError) else "callback" if isinstance(error, CallbackError) else "exception"
    return [kind, describe(error)]


def _callback(index: int):
    def call(*args: Any) -> Any:
        _send(REPLIES, {"callback": index, "args": pack(list(args))}, True)
        reply = _recv(REQUESTS, None, REQUEST_LIMIT, True)
        if "error" in reply:
            raise CallbackError(reply["error"])
        return unpack(reply["ok"])

    return call
