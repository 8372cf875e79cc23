"""The candidate's process (isolation "process"): forked by the zygote next to each
evaluation's scorer process, it locks itself down (lockdown.py), then loads the candidate
when the scorer asks and runs its functions, one request at a time, over two pipes. It
holds no descriptor but those pipes and its output: it cannot reach the result channel, and
everything it sends is checked by the scorer's side (candidate.py)."""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from evo.sandbox import lockdown, protocol
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
    module = None
    while True:
        try:
            request = _recv(REQUESTS, None, REQUEST_LIMIT, True)
        except protocol.Closed:
            return
        if "load" in request:
            module, reply = _load(request["load"])
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
