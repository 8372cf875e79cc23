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

from evo.sandbox import isolation, protocol

STDIN, STDOUT = 0, 1
RESULT_LIMIT = 16 << 20  # a score vector and its extras; more than this cannot be a valid result


def main() -> None:
    config = protocol.recv(STDIN)
    config["host_pid"] = os.getpid()  # before the PID namespace renames us
    tidy = _Tidy(config["scratch"])  # before the mount namespace makes the host read-only
    mode = _enter(config["namespaces"])
    # No PR_SET_PDEATHSIG here: it fires when the *thread* that started us ends. When the
    # search process dies, our stdin closes and we exit at the next request.
    from evo.sandbox import child  # noqa: F401  (import numpy & co. once, not per evaluation)
    from evo.sandbox.loader import ScorerError, load_scorer

    try:
        scorer = load_scorer(config["scorer"], config.get("search_path"))
    except ScorerError as error:
        protocol.send(STDOUT, {"error": str(error)})
        os._exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.freeze()  # fewer copy-on-write faults in each forked evaluation
    failed: list[str] = []
    if mode == "namespaces":
        try:
            failed = isolation.make_readonly(config["scratch"], config["memory_mb"])
        except OSError as error:  # still in fresh PID and network namespaces; files as in the fallback
            failed = [f"(all: {error})"]
        _become_namespace_init(config["scratch"], tidy)
    else:
        isolation.prctl(isolation.PR_SET_CHILD_SUBREAPER, 1)
    Server(config, scorer, mode, tidy).serve(failed)


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
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, STDIN)
    os.dup2(devnull, STDOUT)
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

    def __call__(self) -> None:
        shutil.rmtree(self.scratch, dir_fd=self.top, ignore_errors=True)
        try:
            os.rmdir(self.sandbox_dir, dir_fd=self.top)
        except OSError:
            pass  # another zygote is still there


class Server:
    def __init__(self, config: dict[str, Any], scorer: Any, mode: str, tidy: _Tidy):
        self.config, self.scorer, self.mode, self.tidy = config, scorer, mode, tidy
        self.user: tuple[int, int] | None = None
        if config["drop_privileges"] and os.geteuid() == 0:
            self.user = isolation.private_user(config["host_pid"])

    def serve(self, failed_mounts: list[str]) -> None:
        uid = self.user[0] if self.user else None
        protocol.send(STDOUT, {"ready": True, "mode": self.mode, "uid": uid, "readonly_failed": failed_mounts})
        spare = self._spawn()
        while True:
            try:
                request = protocol.recv(STDIN)
            except protocol.Closed:
                if self.mode != "namespaces":
                    self.tidy()  # (in the namespace, our parent does it)
                os._exit(0)
            workdir = self._prepare(request["code"])
            try:
                reply = self._run(spare, workdir)
            except OSError as error:  # e.g. the spare died: the machine, not the candidate
                reply = {"failure": ["killed", f"the sandbox could not run the evaluation: {error}"]}
            protocol.send(STDOUT, reply)  # answer first, tidy up while the search works
            shutil.rmtree(workdir, ignore_errors=True)
            if self.mode == "namespaces":
                _empty("/dev/shm")
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
            "filename": c["filename"],
            "address_space": address_space + (c["memory_mb"] << 20),
            "cpu_limit": c["cpu_limit"],
            "nproc": nproc,
            "file_bytes": c["memory_mb"] << 20,
            "user": self.user,
            "block_network": self.mode != "namespaces",  # no network namespace: seccomp instead
        }

    def _prepare(self, code: str) -> str:
        """A fresh working directory holding the candidate, owned by the evaluation's user."""
        workdir = os.path.join(self.config["scratch"], secrets.token_hex(8))
        os.mkdir(workdir, 0o700)
        path = os.path.join(workdir, self.config["filename"])
        with open(path, "w", encoding="utf-8") as file:
            file.write(code)
        if self.user is not None:
            os.chown(workdir, *self.user)
            os.chown(path, *self.user)
        return workdir

    def _spawn(self) -> "Spare":
        """Fork the next evaluation process ahead of time: it confines itself, then waits
        for its working directory, so fork and setup cost no latency when a request comes."""
        child_config = self._child_config()
        go_r, go_w = os.pipe()
        result_r, result_w = os.pipe()
        out_r, out_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                from evo.sandbox import child

                os.close(go_w)
                child.run(self.scorer, go_r, (result_w, out_w), child_config)
            finally:
                os._exit(70)
        for fd in (go_r, result_w, out_w):
            os.close(fd)
        return Spare(pid, go_w, Watch(pid, result_r, out_r, self.config["output_bytes"]))

    def _run(self, spare: "Spare", workdir: str) -> dict[str, Any]:
        start, finished = time.monotonic(), False
        in_namespace = self.mode == "namespaces"
        try:
            try:
                os.write(spare.go, workdir.encode())
            finally:
                os.close(spare.go)
            finished = spare.watch.until(start + self.config["timeout"])
        finally:  # whatever happened: kill, reap and close everything of this evaluation
            if not finished:
                isolation.signal_tree(spare.pid, in_namespace)
            _, status, usage = os.wait4(spare.pid, 0)
            seconds = time.monotonic() - start
            isolation.kill_tree(spare.pid, in_namespace)
            spare.watch.drain()
        reply = self._classify(spare.watch.result(), status, usage, timed_out=not finished)
        reply.update(seconds=seconds, output=spare.watch.text())
        return reply

    def _classify(self, result: Any, status: int, usage: Any, timed_out: bool) -> dict[str, Any]:
        if timed_out:  # even if something wrote a result: the evaluation itself never finished
            return {"failure": ["timeout", f"exceeded the {self.config['timeout']:g} s wall-clock limit"]}
        if isinstance(result, dict) and ("scores" in result or "failure" in result):
            return result
        cpu = usage.ru_utime + usage.ru_stime
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= self.config["cpu_limit"]):
                return {"failure": ["timeout", f"exceeded the {self.config['cpu_limit']:g} s CPU-time limit"]}
            return {"failure": ["killed", f"the evaluation was killed by {signal.Signals(sig).name}"]}
        code = os.WEXITSTATUS(status)
        return {"failure": ["killed", f"the evaluation exited (code {code}) before returning a result"]}


@dataclass(frozen=True)
class Spare:
    pid: int
    go: int  # write the working directory here to start the evaluation
    watch: "Watch"


class Watch:
    """Collects an evaluation's result frame and (truncated) output until it exits."""

    def __init__(self, pid: int, result_fd: int, output_fd: int, keep: int):
        self.pidfd = os.pidfd_open(pid)
        self.result_fd, self.output_fd, self.keep = result_fd, output_fd, keep
        self.buffer, self.output, self.dropped = bytearray(), bytearray(), 0
        self.open = [result_fd, output_fd]

    def until(self, deadline: float) -> bool:
        """Read until the process exits (True) or the deadline passes (False)."""
        while True:
            ready = protocol.wait_readable([self.pidfd, *self.open], deadline)
            if not ready:
                return False
            for fd in ready:
                if fd != self.pidfd:
                    self._read(fd)
            if self.pidfd in ready:
                return True

    def _read(self, fd: int) -> bool:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return False
        if not chunk:
            self.open.remove(fd)
            return False
        if fd == self.result_fd:
            if len(self.buffer) < RESULT_LIMIT:
                self.buffer += chunk
        else:
            room = max(0, self.keep - len(self.output))
            self.output += chunk[:room]
            self.dropped += len(chunk) - min(room, len(chunk))
        return True

    def drain(self) -> None:
        """After every writer is dead: read what is left, then close everything."""
        for fd in list(self.open):
            os.set_blocking(fd, False)
            while fd in self.open and self._read(fd):
                pass
        for fd in (self.pidfd, self.result_fd, self.output_fd):
            os.close(fd)

    def result(self) -> Any:
        """The result frame; a bad_output failure when bytes came but no valid frame."""
        try:
            message = protocol.decode_first(bytes(self.buffer))
        except ValueError:
            message = None
        if self.buffer and not (isinstance(message, dict) and ("scores" in message or "failure" in message)):
            return {"failure": ["bad_output", "the evaluation wrote a malformed result"]}
        return message

    def text(self) -> str:
        text = self.output.decode("utf-8", "replace")
        return text + (f"\n[... {self.dropped} more bytes of output dropped]" if self.dropped else "")


def _empty(directory: str) -> None:
    for entry in os.scandir(directory):
        try:
            shutil.rmtree(entry.path) if entry.is_dir(follow_symlinks=False) else os.unlink(entry.path)
        except OSError:
            pass


if __name__ == "__main__":
    main()
