"""The scorer's handle on its candidate: `program = candidate.load(path)`, then call the
candidate's functions as `program.minimize(f, 5, (-1, 1), 100, rng)`.

By default (`[sandbox] isolation = "process"`) the candidate runs in a process of its own
(see runner.py), with another uid, no capabilities and no way to reach the scorer's result
channel; its functions are called over a pipe with JSON-sized values (evo.sandbox.values):
arrays arrive as arrays, tuples as tuples, and callables passed in (an objective function)
run back here, in the scorer's process, when the candidate calls them. Whatever the
candidate does, the scorer only ever sees values; a candidate that raises, dies or sends
something malformed raises `CandidateError`, whose `kind` becomes the evaluation's failure
kind unless the scorer catches it. Elsewhere (isolation "shared" or "none", or a scorer
called by hand) `load` imports the candidate into this process and the calls are direct.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from evo.sandbox import protocol
from evo.sandbox.values import Unsendable, pack, unpack

CHANNEL: tuple[int, int] | None = None  # (to, from) the candidate's process; set in the evaluation process
REPLY_LIMIT = 256 << 20
_loaded: dict[str, "CandidateModule"] = {}
_copy_open = False  # a fresh copy of the candidate's process answers the calls now
_deadline: float | None = None  # (time.monotonic) the answer comes before it (a load's, an open copy's), or never
_broken: CandidateError | None = None  # the channel went out of step: every later exchange fails so
GRACE = 1.0  # seconds past a copy's limit for its process's word that it ended


class CandidateError(Exception):
    """The candidate raised, died or answered something that is not a value."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # a failure kind: exception, memory, killed, timeout or bad_output


class CandidateModule:
    """A candidate's module: its public functions are attributes. `with program.fresh(s) as
    copy:` calls a fresh copy of it (see `fresh`)."""

    def __init__(self, names: list[str], call: Callable[..., Any], remote: bool = False):
        self._names, self._call, self._remote = frozenset(names), call, remote

    @contextlib.contextmanager
    def fresh(self, seconds: float) -> Iterator["CandidateModule"]:
        """A fresh copy of the candidate as it was loaded, for a few calls (one test): in
        the sandbox, a fork of the candidate's process, killed after `seconds` of wall time
        (a call then raises CandidateError of kind `timeout`) and when the block ends, so
        that what one test's calls change never reaches the next. Outside the sandbox (the
        candidate imported here), the module itself, without a time limit."""
        if not self._remote:
            yield self
            return
        global _copy_open, _deadline
        if _copy_open:
            raise CandidateError("exception", "fresh copies are not nested")
        _deadline = time.monotonic() + float(seconds) + GRACE
        try:
            _exchange({"fork": float(seconds)}, [])
            _copy_open = True
            yield self
        finally:
            if _copy_open:
                _end_copy()
            _copy_open, _deadline = False, None

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_") or name not in self._names:
            raise AttributeError(f"the candidate defines no function {name!r}")
        return lambda *args, **kwargs: self._call(name, args, kwargs)

    def __dir__(self) -> list[str]:
        return sorted(self._names)


def load(path: str | os.PathLike, seconds: float | None = None) -> CandidateModule:
    """The candidate program at `path`, executed once (its top-level code runs now). With
    `seconds` (in the sandbox), top-level code that runs longer raises CandidateError of
    kind `timeout` then, instead of holding the evaluation until its own limit."""
    path = os.fspath(path)
    if CHANNEL is None:
        return _load_in_process(path)
    if path not in _loaded:  # (its process holds one module)
        if _loaded:
            raise CandidateError("exception", "one evaluation loads one candidate")
        _loaded[path] = _load_remote(path, seconds)
    return _loaded[path]


def describe(error: BaseException) -> str:
    """One line: the exception and where it was raised."""
    try:
        text = f"{type(error).__name__}: {error}"
    except BaseException:
        text = type(error).__name__
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is not None:
        text += f" (at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno})"
    return " ".join(text.split())[:500]


def _load_in_process(path: str) -> CandidateModule:
    spec = importlib.util.spec_from_file_location("candidate", path)
    if spec is None or spec.loader is None:
        raise CandidateError("exception", f"cannot load the candidate {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    names = [n for n in vars(module) if not n.startswith("_") and callable(vars(module)[n])]

    def call(name: str, args: tuple, kwargs: dict) -> Any:
        try:
            return getattr(module, name)(*args, **kwargs)
        except MemoryError as error:
            raise CandidateError("memory", describe(error)) from error
        except Exception as error:
            raise CandidateError("exception", describe(error)) from error

    return CandidateModule(names, call)


def _load_remote(path: str, seconds: float | None) -> CandidateModule:
    global _deadline
    _deadline = None if seconds is None else time.monotonic() + seconds
    try:
        names = _exchange({"load": path}, [])
    finally:
        _deadline = None
    if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        raise CandidateError("bad_output", "the candidate's process answered the load with a malformed list")
    return CandidateModule(names, _call_remote, remote=True)


def _call_remote(name: str, args: tuple, kwargs: dict) -> Any:
    callables: list[Callable] = []
    try:
        message = {"call": name, "args": pack(list(args), callables), "kwargs": pack(kwargs, callables)}
    except Unsendable as error:
        raise TypeError(f"cannot pass {error} to the candidate (JSON-sized values, arrays, callables)") from None
    return _exchange(message, callables)


def _exchange(message: dict, callables: list[Callable]) -> Any:
    """Send one request and serve the candidate's callbacks until its answer comes."""
    global _broken
    assert CHANNEL is not None
    if _broken is not None:
        raise _broken
    to, back = CHANNEL
    raised: list[BaseException] = []
    try:
        protocol.send(to, message, nan=True)
        while True:
            reply = protocol.recv(back, _deadline, REPLY_LIMIT, nan=True)
            if isinstance(reply, dict) and "callback" in reply:
                protocol.send(to, _callback(reply, callables, raised), nan=True)
                continue
            if isinstance(reply, dict) and "ended" in reply:
                _ended(reply["ended"])
            return _answer(reply, raised)
    except (protocol.Closed, BrokenPipeError):
        raise CandidateError("killed", "the candidate's process ended without answering (exit, signal or limit)") from None
    except TimeoutError:
        _broken = CandidateError("timeout", "the candidate's process did not answer in time")
        raise _broken from None
    except protocol.BadFrame as error:  # (the stream is out of step now)
        _broken = CandidateError("bad_output", f"the candidate answered something that is not a value ({error})")
        raise _broken from None
    except Unsendable as error:
        raise CandidateError("bad_output", f"the candidate answered something that is not a value ({error})") from None


def _ended(how: Any) -> None:
    """The fresh copy ended before it answered: past its time limit, or it exited."""
    global _copy_open
    if not _copy_open:
        raise CandidateError("bad_output", "the candidate's process sent an end it was not asked for")
    _copy_open = False
    if how == "timeout":
        raise CandidateError("timeout", "the candidate's fresh copy ran past its time limit")
    raise CandidateError("killed", "the candidate's fresh copy ended without answering (exit, signal or limit)")


def _end_copy() -> None:
    """Ask the fresh copy to exit, and wait for its process's word that it has."""
    global _copy_open, _broken
    _copy_open = False
    to, back = CHANNEL  # type: ignore[misc]
    try:
        protocol.send(to, {"end": True}, nan=True)
        while _broken is None:
            reply = protocol.recv(back, _deadline, REPLY_LIMIT, nan=True)
            if isinstance(reply, dict) and "ended" in reply:
                return
            # (anything else: what the copy sent after its last answer; it may be hostile)
    except (protocol.Closed, BrokenPipeError):
        pass
    except (TimeoutError, protocol.BadFrame):
        _broken = CandidateError("bad_output", "the candidate's process did not end its fresh copy in step")


def _callback(request: dict, callables: list[Callable], raised: list[BaseException]) -> dict:
    index, args = request.get("callback"), request.get("args")
    if not (isinstance(index, int) and 0 <= index < len(callables) and isinstance(args, list)):
        raise Unsendable("a malformed callback")
    try:
        return {"ok": pack(callables[index](*unpack(args)))}
    except Exception as error:  # passed to the candidate, which may catch it
        raised.append(error)
        return {"error": describe(error)}


def _answer(reply: Any, raised: list[BaseException]) -> Any:
    if isinstance(reply, dict) and "ok" in reply:
        return unpack(reply["ok"])
    error = reply.get("error") if isinstance(reply, dict) else None
    if not (isinstance(error, list) and len(error) == 2 and all(isinstance(e, str) for e in error)):
        raise Unsendable("a malformed reply")
    kind, text = error
    if kind == "callback" and raised:
        raise raised[-1]  # the scorer's own exception went through the candidate unhandled
    if kind not in ("exception", "memory", "bad_output"):
        kind = "exception"
    raise CandidateError(kind, text[:2000])
