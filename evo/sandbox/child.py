"""The scorer's evaluation process: forked from a warm zygote ahead of time, it confines
itself (session, fds, limits, user), waits for its candidate's working directory on fd 4,
calls the scorer there and writes one result frame to fd 3. With isolation "process" the
candidate runs elsewhere (runner.py; the scorer reaches it through evo.sandbox.candidate on
fds 5 and 6) and this process keeps one capability, to read files; with "shared" the
candidate's code runs here, so this process locks itself down as the candidate's would.
It never returns to the zygote's code: every path ends in os._exit."""

from __future__ import annotations

import fcntl
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evo.sandbox import candidate, isolation, lockdown, protocol
from evo.scores import MAX_FEEDBACK_CHARS, BadOutput, ScorerFailed, oriented, scalarize, split_feedback, to_vector, unwrap

_exit = os._exit  # bound now: a candidate may monkeypatch the os module
_encode = protocol.encode
_write = os.write
RESULT_FD, GO_FD, TO_CANDIDATE, FROM_CANDIDATE = 3, 4, 5, 6


def run(scorer: Callable[[str], Any], go: int, fds: tuple[int, int], config: dict[str, Any],
        channel: tuple[int, int] | None = None) -> None:
    """Confine this process, wait for the working directory on `go`, evaluate, exit."""
    try:
        result_w, out_w = fds
        extra = {TO_CANDIDATE: channel[0], FROM_CANDIDATE: channel[1]} if channel else {}
        own_fds({0: os.open(os.devnull, os.O_RDONLY), 1: out_w, 2: out_w, RESULT_FD: result_w, GO_FD: go, **extra})
        _confine(config)
        candidate.CHANNEL = (TO_CANDIDATE, FROM_CANDIDATE) if channel else None
        _warm_up(config["objectives"])
        message = _read_all(GO_FD).decode()
        if not message:
            return  # the zygote is shutting down
        program_dir, own_dir = message.split("\0")
        enter_workdir(own_dir)
        path = os.path.join(program_dir, config["filename"])
        sys.argv = [path]
        reply = evaluate(scorer, path, config["objectives"], config["required_extras"], config["minimize"])
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        data = memoryview(_encode(reply))
        while data:
            data = data[_write(RESULT_FD, data):]
    finally:
        _exit(0)


def enter_workdir(directory: str) -> None:
    """Make `directory` this process's working directory, HOME and TMPDIR (also for a
    `tempfile` that cached another directory before the fork)."""
    os.chdir(directory)
    os.environ.update(HOME=directory, TMPDIR=directory, USER="evo-sandbox", LOGNAME="evo-sandbox")
    if "tempfile" in sys.modules:
        setattr(sys.modules["tempfile"], "tempdir", None)


def own_fds(targets: dict[int, int]) -> None:
    """A new session holding exactly `targets` (fd -> the fd to put there), nothing else."""
    os.setsid()
    high = {target: fcntl.fcntl(source, fcntl.F_DUPFD, 64) for target, source in targets.items()}
    for target, source in high.items():  # via high copies: a source may sit on a target
        os.dup2(source, target)
    os.closerange(max(targets) + 1, 1 << 16)


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _confine(config: dict[str, Any]) -> None:
    os.umask(0o077)  # the scorer's files are its own: the candidate cannot read one by guessing its name
    if not config["split"]:  # the candidate's code runs in this process
        lockdown.candidate_process(config)
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    isolation.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL)
    isolation.set_limits(config["address_space"], config["cpu_limit"], config["nproc"], config["file_bytes"])
    isolation.prctl(isolation.PR_SET_NO_NEW_PRIVS, 1)
    isolation.prctl(isolation.PR_SET_DUMPABLE, 0)  # no /proc/<pid>/fd or ptrace for anyone of the same uid
    if config["user"] is not None:
        isolation.drop_privileges(*config["user"])
    isolation.seccomp_sockets(inet=config["block_network"])


def _warm_up(objectives: Sequence[str]) -> None:
    """Touch the result path once while idle: its copy-on-write faults then cost no latency."""
    _encode({"scores": to_vector([0.0] * len(objectives), objectives)[0].tolist(), "extras": {}})


@dataclass(frozen=True)
class Stages:
    """A cascade of scorers: stage i + 1 runs only when the scalar (the weighted mean, by
    `weights`) of stage i's vector is at least `thresholds[i]`."""

    functions: tuple[Callable[[str], Any], ...]
    thresholds: tuple[float, ...] = ()
    weights: tuple[float, ...] = ()


def evaluate(scorer: Callable[[str], Any] | Stages, path: str, objectives: Sequence[str], required: Sequence[str],
             minimize: Sequence[str] = ()) -> dict:
    """Call the scorer (every stage of a cascade the candidate clears) and validate each
    answer; returns a reply dict (scores or failure) with the stage reached. The objectives
    in `minimize` are negated (the vector is higher-is-better, thresholds compare that)."""
    stages = scorer if isinstance(scorer, Stages) else Stages((scorer,))
    reply: dict = {}
    for stage, function in enumerate(stages.functions, 1):
        if stage > 1 and float(scalarize(reply["scores"], stages.weights)) < stages.thresholds[stage - 2]:
            break
        reply = {**_stage(function, path, objectives, required, minimize), "stage": stage}
        if "failure" in reply:
            break
    return reply


def _stage(scorer: Callable[[str], Any], path: str, objectives: Sequence[str], required: Sequence[str],
           minimize: Sequence[str]) -> dict:
    try:
        raw, artifacts = unwrap(scorer(path), objectives)
        raw, feedback = split_feedback(raw, objectives)
        vector, extras = to_vector(raw, objectives)
        missing = [key for key in required if key not in extras]
        if missing:
            raise BadOutput(f"scorer result misses feature key(s) {missing}")
        feedback = "\n".join(filter(None, [feedback, artifacts]))[:MAX_FEEDBACK_CHARS]
        return {"scores": oriented(vector, objectives, minimize).tolist(), "extras": extras, "feedback": feedback}
    except BaseException as error:  # the candidate may raise anything, even SystemExit
        artifacts = error.artifacts[:MAX_FEEDBACK_CHARS] if isinstance(error, ScorerFailed) else ""
        return {"failure": failure_of(error), **({"feedback": artifacts} if artifacts else {})}


def failure_of(error: BaseException) -> list[str]:
    """[kind, message] of a scorer call that raised (or whose result was refused)."""
    if isinstance(error, BadOutput):
        return ["bad_output", str(error)]
    if isinstance(error, ScorerFailed):
        return ["exception", f"the scorer reported: {error}"]
    if isinstance(error, candidate.CandidateError):  # not caught by the scorer: the candidate's failure is the evaluation's
        return [error.kind, str(error)]
    if isinstance(error, MemoryError):
        return ["memory", f"memory limit exceeded ({candidate.describe(error)})"]
    return ["exception", candidate.describe(error)]
