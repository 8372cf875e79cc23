"""The search process's handle on one warm zygote: start it, send it candidates, enforce a
backstop deadline, and replace it when it dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from evo.sandbox import cgroup, isolation, lockdown, protocol
from evo.sandbox.loader import ScorerError

STARTUP_SECONDS = 120.0  # importing a heavy scorer (torch) on a loaded machine is slow
BACKSTOP_SECONDS = 10.0  # on top of the evaluation timeout, before we kill the zygote itself
REPLY_LIMIT = 2 << 20  # a reply, less its captured output (results are bounded by evo.scores)
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


class Worker:
    def __init__(self, config: dict[str, Any], scratch: Path):
        self.config, self.scratch = config, scratch
        self.proc: subprocess.Popen[bytes] | None = None
        self.mode = ""
        self.uids: list[int] = []  # the evaluations' private uids, when the zygote drops privileges
        self.cgroup: str | None = None  # the evaluations' memory cgroup, when there is one

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def launch(self) -> None:
        """Start the zygote process and send it its configuration (returns at once)."""
        self.scratch.mkdir(mode=0o711, exist_ok=True)
        os.chmod(self.scratch, 0o711)
        env = lockdown.minimal_env(dict(os.environ), tuple(self.config["env"]))  # no secrets reach the sandbox
        for name in _THREAD_VARS:
            env.setdefault(name, "1")
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        with open(self.scratch / "zygote.log", "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "evo.sandbox.zygote"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                cwd=self.scratch, env=env, start_new_session=True,
            )
        self._send({**self.config, "scratch": str(self.scratch)})

    def wait_ready(self) -> None:
        """Wait until the zygote has imported the scorer; ScorerError when it cannot."""
        try:
            reply = self._recv(time.monotonic() + STARTUP_SECONDS)
            if not isinstance(reply, dict) or not ("error" in reply or {"mode", "uids", "cgroup"} <= set(reply)):
                raise protocol.BadFrame("not a ready message")
        except (protocol.Closed, TimeoutError, protocol.BadFrame) as error:
            self.kill()
            raise ScorerError(f"the sandbox worker did not start ({error}){self._log_tail()}") from None
        if "error" in reply:
            self.kill()
            raise ScorerError(str(reply["error"])[:500])
        self.mode, self.uids, self.cgroup = reply["mode"], reply["uids"], reply["cgroup"]

    def evaluate(self, code: str) -> dict[str, Any]:
        """The zygote's reply for one candidate, or a failure reply when the zygote died or hung."""
        if self.proc is None or self.proc.poll() is not None:
            self.kill()  # (a dead zygote's orphans and cgroup)
            self.start()
        try:
            self._send({"code": code})
            return self._recv(time.monotonic() + self.config["timeout"] + BACKSTOP_SECONDS)
        except protocol.BadFrame as error:  # (the stream may be out of step now)
            self.kill()
            return {"failure": ["bad_output", f"the sandbox worker sent a malformed reply ({error})"]}
        except TimeoutError:
            self.kill()
            return {"failure": ["timeout", f"exceeded the {self.config['timeout']:g} s wall-clock limit (worker hung)"]}
        except (protocol.Closed, OSError, KeyError, TypeError, ValueError) as error:
            self.kill()
            return {"failure": ["killed", f"the sandbox worker died during the evaluation ({error})"]}

    def _send(self, message: Any) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        protocol.send(self.proc.stdin.fileno(), message)

    def _recv(self, deadline: float) -> Any:
        assert self.proc is not None and self.proc.stdout is not None
        limit = REPLY_LIMIT + 8 * self.config["output_bytes"]  # output is JSON-escaped: at most 6 bytes a byte
        return protocol.recv(self.proc.stdout.fileno(), deadline, limit)

    def kill(self) -> None:
        """Kill the zygote and its process group; in the PID namespace that takes every
        evaluation process with it, otherwise we also kill every process of the private uid."""
        if self.proc is not None:
            if self.mode != "namespaces":
                self._kill_children()
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()
            if self.mode != "namespaces":
                for uid in self.uids:
                    isolation.kill_user(uid)  # orphans that left the process group
                if self.uids and os.path.isdir("/dev/shm"):
                    isolation.remove_owned("/dev/shm", set(self.uids))  # (the zygote cleans after all but the last)
            leftover = cgroup.path_of(cgroup.zygote_name(self.proc.pid))  # (also when it never got ready)
            if leftover is not None and os.path.isdir(leftover):
                cgroup.remove(leftover)
            self.cgroup = None
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    stream.close()
            self.proc = None

    def _kill_children(self) -> None:
        """Outside the PID namespace the zygote's children lead process groups of their own:
        the spare pair forked ahead, a running evaluation, orphans re-parented to the zygote
        (their subreaper). Stop the zygote, so that it forks no more, and kill them first:
        nothing of it outlives kill(), with or without private uids to sweep."""
        assert self.proc is not None
        try:
            os.kill(self.proc.pid, signal.SIGSTOP)
        except ProcessLookupError:
            return
        isolation.wait_gone(isolation.kill_children(self.proc.pid))

    def _log_tail(self) -> str:
        try:
            lines = (self.scratch / "zygote.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return f": {lines[-1][:300]}" if lines else ""
