"""The warm worker ("zygote"): `python -P -m evo.sandbox.zygote`, driven over stdin/stdout.

It imports the scorer once, then forks one fresh child per evaluation, ahead of time (see
child.py), enforces the wall-clock deadline, captures the child's output, and kills everything the
child left behind before answering. As root it first enters new mount/network/IPC/PID
namespaces and forks the serving process as PID 1 of the new PID namespace, so that
`kill(-1)` after each evaluation reaches every process the candidate started; otherwise
it serves as child subreaper and kills the process group and re-parented orphans.
"""

from __future__ import annotations

import gc
import os
import secrets
import shutil
import signal
import time
from dataclasses import dataclass
from typing import Any

from evo.sandbox import cgroup, isolation, lockdown, mounts, protocol
from evo.sandbox.watch import Watch

STDIN, STDOUT = 0, 1  # replaced by private copies in main(): fd 1 is for stray output


def _private_channel() -> None:
    """Move the protocol off fds 0 and 1, so that nothing the scorer prints while it is
    imported (or later) can reach the search process's pipe: fd 1 becomes the log (fd 2)."""
    global STDIN, STDOUT
    STDIN, STDOUT = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)


def main() -> None:
    _private_channel()
    config = protocol.recv(STDIN)
    config["host_pid"] = os.getpid()  # before the PID namespace renames us
    tidy = _Tidy(config["scratch"])  # before the mount namespace makes the host read-only
    name = cgroup.zygote_name(os.getpid())  # (the search process removes it after us, whatever happened)
    config["cgroup"] = cgroup.create(name, config["memory_mb"] << 20) if config["use_cgroup"] else None
    tidy.cgroup = config["cgroup"]
    mode = _enter(config["namespaces"])
    # No PR_SET_PDEATHSIG here: it fires when the *thread* that started us ends. When the
    # search process dies, our stdin closes and we exit at the next request.
    from evo.sandbox import child, runner  # noqa: F401  (import numpy & co., and the candidate side, once)
    from evo.sandbox.loader import ScorerError, load_stages

    try:
        scorer = load_stages(config["scorer"], config["cascade"], config["weights"], config.get("search_path"))
    except ScorerError as error:
        protocol.send(STDOUT, {"error": str(error)})
        os._exit(0)
    _preload()
    for links in (False, True):  # the scorer's filter and the candidate's (built once: every evaluation installs them)
        isolation.seccomp_program(mode != "namespaces", links)
    isolation.prctl(isolation.PR_SET_DUMPABLE, 0)  # no process of our uid (a candidate, when not root) opens our fds
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.freeze()  # fewer copy-on-write faults in each forked evaluation
    if mode == "namespaces":
        keep = (os.path.dirname(config["cgroup"]),) if config["cgroup"] else ()  # (its parent: we remove it at exit)
        try:
            writable = mounts.make_readonly(config["scratch"], config["memory_mb"], keep)
        except OSError as error:
            writable = [f"(all: {error})"]
        if writable:  # a candidate could write there: refuse to serve
            shown = ", ".join(writable)[:300]
            protocol.send(STDOUT, {"error": f"the sandbox cannot make these mounts read-only: {shown} "
                                            "(unmount them, or run with namespaces off)"})
            os._exit(0)
        _become_namespace_init(config["scratch"], tidy)
    else:
        isolation.prctl(isolation.PR_SET_CHILD_SUBREAPER, 1)
    Server(config, scorer, mode, tidy).serve()


PRELOAD = ("bisect", "collections", "ctypes", "functools", "heapq", "itertools", "json", "math", "random", "re",
           "socket", "encodings.idna", "statistics", "subprocess", "threading", "time", "multiprocessing",
           "numpy", "numpy.random", "numpy.linalg", "numpy.fft", "numpy.polynomial")


def _preload() -> None:
    """Import common modules once: a candidate's process has no capability left to read a
    Python installation in a private home (such as /root), but finds these in memory."""
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    _warm_exchange()


def _warm_exchange() -> None:
    """Run the frame and value code of a call a few times here, while nothing waits: code
    the interpreter has already specialized writes fewer of the pages a forked evaluation
    shares with us (about a quarter fewer copy-on-write faults on these paths)."""
    from evo.sandbox import values

    for _ in range(8):
        message = {"call": "f", "args": values.pack([1, 2.5, "x", (1, 2), [None, True]]), "kwargs": values.pack({"k": 1})}
        back = protocol.decode(protocol.encode(message, True)[4:], True)
        values.unpack(back["args"]), values.unpack(back["kwargs"])
        protocol.decode(protocol.encode({"ok": values.pack([1.0, {5: "a"}])}, True)[4:], True)


def _enter(wanted: str) -> str:
    """'namespaces' when we could enter fresh namespaces, else 'rlimits' (the fallback)."""
    if wanted == "off":
        return "rlimits"
    try:
        if os.geteuid() != 0:
            raise PermissionError("namespaces need root")
        isolation.enter_namespaces()
        return "namespaces"
    except OSError as error:
        if wanted == "on":
            protocol.send(STDOUT, {"error": f"cannot enter namespaces: {error}"})
            os._exit(0)
        return "rlimits"


def _become_namespace_init(scratch: str, tidy: "_Tidy") -> None:
    """Fork the server as PID 1 of the new PID namespace; this process only waits for it
    (and tidies up after it)."""
    pid = os.fork()
    if pid == 0:
        isolation.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL)
        isolation.mount_proc()
        return
    os.close(STDIN)
    os.close(STDOUT)
    _, status = os.waitpid(pid, 0)
    try:
        isolation.unmount(scratch)
    except OSError:
        pass
    tidy()
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


class _Tidy:
    """Removes the zygote's directory (and the sandbox's, when it is the last one out) if the
    search process died without closing us. Works through a descriptor opened on the host's
    mounts, before our mount namespace turned them read-only."""

    def __init__(self, scratch: str):
        sandbox_dir = os.path.dirname(scratch)
        self.top = os.open(os.path.dirname(sandbox_dir), os.O_RDONLY | os.O_DIRECTORY)
        self.sandbox_dir = os.path.basename(sandbox_dir)
        self.scratch = os.path.join(self.sandbox_dir, os.path.basename(scratch))
        self.cgroup: str | None = None  # (in the namespace, through the writable bind mount of its parent)

    def __call__(self) -> None:
        if self.cgroup is not None:
            cgroup.remove(self.cgroup, attempts=5)
        shutil.rmtree(self.scratch, dir_fd=self.top, ignore_errors=True)
        try:
            os.rmdir(self.sandbox_dir, dir_fd=self.top)
        except OSError:
            pass  # another zygote is still there


class Server:
    def __init__(self, config: dict[str, Any], scorer: Any, mode: str, tidy: _Tidy):
        self.config, self.scorer, self.mode, self.tidy = config, scorer, mode, tidy
        self.split = config["isolation"] == "process"
        self.view = _candidate_view(config["scratch"])
        self.user: tuple[int, int] | None = None  # the scorer's process's
        self.candidate_user: tuple[int, int] | None = None  # the process that runs the candidate
        if config["drop_privileges"] and os.geteuid() == 0:
            self.user = isolation.private_user(config["host_pid"])
            self.candidate_user = isolation.private_user(config["host_pid"], candidate=self.split)

    def serve(self) -> None:
        uids = sorted({user[0] for user in (self.user, self.candidate_user) if user})
        protocol.send(STDOUT, {"ready": True, "mode": self.mode, "uids": uids, "cgroup": self.config["cgroup"]})
        spare = self._spawn()
        while True:
            try:
                request = protocol.recv(STDIN)
            except protocol.Closed:
                if self.mode != "namespaces":  # (in the namespace, our parent does it)
                    isolation.kill_tree(spare.pid, False)  # (its processes are in our memory cgroup)
                    self.tidy()
                os._exit(0)
            workdir = self._prepare(request["code"])
            try:
                reply = self._run(spare, workdir)
            except OSError as error:  # e.g. the spare died: the machine, not the candidate
                reply = {"failure": ["killed", f"the sandbox could not run the evaluation: {error}"]}
            protocol.send(STDOUT, reply)  # answer first, tidy up while the search works
            if self.mode == "namespaces":  # (the fallback reaped before it answered)
                _reap(spare.candidate)
                _reap(spare.pid)
                isolation.kill_tree(spare.pid, True)
            shutil.rmtree(os.path.dirname(workdir.program), ignore_errors=True)
            if self.mode == "namespaces":
                isolation.remove_owned("/dev/shm")
            elif self.candidate_user is not None:  # the host's /dev/shm: what the evaluation's uids left there
                isolation.remove_owned("/dev/shm", {self.candidate_user[0], self.user[0]})  # type: ignore[index]
            spare = self._spawn()

    def _child_config(self) -> dict[str, Any]:
        c = self.config
        with open("/proc/self/statm", "rb") as statm:
            address_space = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        if self.user is not None:
            nproc: int | None = c["max_processes"]
        elif os.geteuid() != 0:
            nproc = isolation.own_process_count(os.getuid()) + c["max_processes"]
        else:
            nproc = None  # root ignores RLIMIT_NPROC
        return {
            "objectives": c["objectives"],
            "required_extras": c["required_extras"],
            "minimize": c["minimize"],
            "filename": c["filename"],
            "split": self.split,
            "address_space": address_space + (c["memory_mb"] << 20),
            "cpu_limit": c["cpu_limit"],
            "nproc": nproc,
            "file_bytes": c["memory_mb"] << 20,
            "memory_mb": c["memory_mb"],
            "cgroup": c["cgroup"],
            "user": self.user,
            "candidate_user": self.candidate_user,
            "block_network": self.mode != "namespaces",  # no network namespace: seccomp instead
        }

    def _prepare(self, code: str) -> "Workdir":
        """Fresh directories for one evaluation, under one only we can write: the candidate's
        (holds the program; owned by the candidate's user, readable by the scorer) and, when
        the scorer runs in a process of its own, the scorer's (owned by the scorer's user,
        0711: the candidate can neither list nor change it). Each is its process's working
        directory, HOME and TMPDIR."""
        top = os.path.join(self.config["scratch"], secrets.token_hex(8))
        os.mkdir(top, 0o711)
        program = os.path.join(top, "program")
        os.mkdir(program, 0o755)  # (the scorer's process may read what the candidate writes)
        path = os.path.join(program, self.config["filename"])
        with open(path, "w", encoding="utf-8") as file:
            file.write(code)
        if self.candidate_user is not None:
            os.chown(program, *self.candidate_user)
            os.chown(path, *self.candidate_user)
        if not self.split:
            return Workdir(program, program)
        scorer = os.path.join(top, "scorer")
        os.mkdir(scorer, 0o711)
        if self.user is not None:
            os.chown(scorer, *self.user)
        return Workdir(program, scorer)

    def _spawn(self) -> "Spare":
        """Fork the next evaluation ahead of time (its candidate's process too, when split):
        each confines itself, then waits, so fork and setup cost no latency when a request
        comes. Only the scorer's process gets the result pipe."""
        child_config = self._child_config()
        go_r, go_w = os.pipe()
        result_r, result_w = os.pipe()
        out_r, out_w = os.pipe()
        channel, candidate_pid = None, None
        if self.split:
            to_r, to_w = os.pipe()
            back_r, back_w = os.pipe()
            candidate_pid = _fork(lambda: _run_candidate((to_r, back_w, out_w), child_config, self.view))
            os.close(to_r)
            os.close(back_w)
            channel = (to_w, back_r)
        view = None if self.split else self.view  # (the scorer's process keeps the zygote's view)
        pid = _fork(lambda: _run_scorer(self.scorer, go_r, (result_w, out_w), child_config, channel, view))
        for fd in (go_r, result_w, out_w, *(channel or ())):
            os.close(fd)
        return Spare(pid, go_w, Watch(pid, result_r, out_r, self.config["output_bytes"]), candidate_pid)

    def _run(self, spare: "Spare", workdir: "Workdir") -> dict[str, Any]:
        start, finished = time.monotonic(), False
        in_namespace = self.mode == "namespaces"
        # With isolation "process", only the scorer's process holds the result pipe: a whole
        # frame there is its last act, and in the PID namespace we need not wait for its exit
        # (with "shared", a candidate could write one and run on: we wait, as for a timeout)
        at_result = in_namespace and self.split
        ooms, candidate_status = cgroup.oom_kills(self.config["cgroup"]), None
        try:
            try:
                os.write(spare.go, f"{workdir.program}\0{workdir.scorer}".encode())
            finally:
                os.close(spare.go)
            fallback = None if self.config["cgroup"] else self.config["memory_mb"] << 20
            finished = spare.watch.until(start + self.config["timeout"], fallback, at_result)
        finally:  # whatever happened: kill, reap and close everything of this evaluation
            early = finished and at_result and spare.watch.complete()  # (killed, not waited for: reaped after the answer)
            if not finished or early:
                isolation.signal_tree(spare.pid, in_namespace)
            status, usage = (0, None) if early else os.wait4(spare.pid, 0)[1:]
            seconds = time.monotonic() - start
            spare.watch.drain()  # (the candidate's output came before its answer: it is in the pipe)
            result = spare.watch.result()
            if spare.candidate is not None and _failure_kind(result) == "killed":
                candidate_status = _status_soon(spare.candidate)  # why did it die?
            if in_namespace:  # every process of the evaluation is dying now; serve() reaps them after the answer
                isolation.signal_tree(spare.pid, True)
            else:
                if spare.candidate is not None and candidate_status is None:
                    _kill_and_reap(spare.candidate)
                isolation.kill_tree(spare.pid, False)
        if spare.watch.over_memory:
            reply = self._over_memory()
        else:
            reply = self._classify(result, status, usage, timed_out=not finished)
        return {**self._blame(reply, candidate_status, ooms), "seconds": seconds, "output": spare.watch.text()}

    def _over_memory(self) -> dict[str, Any]:
        return {"failure": ["memory", f"the evaluation's processes together exceeded {self.config['memory_mb']} MB"]}

    def _blame(self, reply: dict[str, Any], candidate_status: int | None, ooms: int) -> dict[str, Any]:
        """Name the limit that killed a process of the evaluation, if one did: the memory
        cgroup's (whatever the scorer answered: the evaluation went past its limit), or the
        CPU limit of the candidate's process (when the scorer saw it die)."""
        if cgroup.oom_kills(self.config["cgroup"]) > ooms:
            return self._over_memory()
        if _failure_kind(reply) != "killed":
            return reply
        if candidate_status is not None and os.WIFSIGNALED(candidate_status) and os.WTERMSIG(candidate_status) == signal.SIGXCPU:
            return {"failure": ["timeout", f"exceeded the {self.config['cpu_limit']:g} s CPU-time limit"]}
        return reply

    def _classify(self, result: Any, status: int, usage: Any, timed_out: bool) -> dict[str, Any]:
        if timed_out:  # even if something wrote a result: the evaluation itself never finished
            return {"failure": ["timeout", f"exceeded the {self.config['timeout']:g} s wall-clock limit"]}
        if isinstance(result, dict) and ("scores" in result or "failure" in result):
            return result
        if usage is None:
            return {"failure": ["bad_output", "the evaluation wrote a malformed result"]}
        cpu = usage.ru_utime + usage.ru_stime
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= self.config["cpu_limit"]):
                return {"failure": ["timeout", f"exceeded the {self.config['cpu_limit']:g} s CPU-time limit"]}
            return {"failure": ["killed", f"the evaluation was killed by {signal.Signals(sig).name}"]}
        code = os.WEXITSTATUS(status)
        return {"failure": ["killed", f"the evaluation exited (code {code}) before returning a result"]}


def _failure_kind(reply: Any) -> str | None:
    failure = reply.get("failure") if isinstance(reply, dict) else None
    return failure[0] if isinstance(failure, list) and failure else None


def _kill_and_reap(pid: int) -> None:
    """SIGKILL a child of ours (and its process group) and reap it, at once: kill_tree then
    finds only what it left behind, instead of polling (or, without namespaces, scanning
    /proc) until it has exited."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _reap(pid: int | None) -> None:
    """Wait for a child we have killed (at once: kill_tree would poll)."""
    try:
        if pid is not None:
            os.waitpid(pid, 0)
    except ChildProcessError:
        pass  # (already reaped: _status_soon saw it die)


def _status_soon(pid: int, seconds: float = 0.1) -> int | None:
    """The wait status of a child that is dying now, or None if it is still alive."""
    end = time.monotonic() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done or time.monotonic() > end:
            return status if done else None
        time.sleep(0.002)


def _fork(body: Any) -> int:
    """Fork a process that runs `body` (which closes the fds it does not need) and never
    returns here."""
    pid = os.fork()
    if pid == 0:
        try:
            body()
        finally:
            os._exit(70)
    return pid


def _run_scorer(scorer: Any, go: int, fds: tuple[int, int], config: dict, channel: tuple[int, int] | None,
                view: int | None) -> None:
    from evo.sandbox import child

    lockdown.enter_view(view)
    child.run(scorer, go, fds, config, channel)


def _run_candidate(fds: tuple[int, int, int], config: dict, view: int | None) -> None:
    from evo.sandbox import runner

    lockdown.enter_view(view)
    runner.run(fds, config)


def _candidate_view(scratch: str) -> int | None:
    """As root, when the Python installation (or the scratch directory) lies where other
    users cannot enter: a mount namespace that shows it to candidates (else None)."""
    needed = mounts.python_paths() + [scratch]
    if os.geteuid() != 0 or not mounts.needs_private_view(needed):
        return None
    try:
        return mounts.view_namespace(needed)
    except OSError:
        return None  # (then candidates read only what any user may read)


@dataclass(frozen=True)
class Workdir:
    program: str  # the candidate's directory, holding the program
    scorer: str  # the scorer's own (the same directory when the candidate runs in its process)


@dataclass(frozen=True)
class Spare:
    pid: int
    go: int  # write the working directory here to start the evaluation
    watch: "Watch"
    candidate: int | None  # the candidate's own process (isolation "process")


if __name__ == "__main__":
    main()
