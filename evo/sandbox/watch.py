"""Watching one evaluation from the zygote: its result frame, its (truncated) output, its
exit, and (without a memory cgroup) the memory of everything it started."""

from __future__ import annotations

import os
import time
from typing import Any

from evo.sandbox import protocol

RESULT_LIMIT = 1 << 20  # a score vector and its extras (bounded by evo.scores); more cannot be valid
CHECK_SECONDS = 0.05  # how often the fallback sums the evaluation's memory


def descendants(root: int) -> list[int]:
    """Every live descendant of `root`, from one scan of /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as stat:
                    parent = int(stat.read().rpartition(b")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, stack = [], list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def private_memory(pids: list[int]) -> int:
    """Bytes of memory the processes do not share with anyone (so not the zygote's pages
    they inherited), swap included."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as lines:
                for line in lines:
                    if line.startswith((b"Private_Clean:", b"Private_Dirty:", b"Swap:")):
                        total += int(line.split()[1]) << 10
        except (OSError, ValueError, IndexError):
            continue
    return total


class Watch:
    """Collects an evaluation's result frame and (truncated) output until it exits."""

    def __init__(self, pid: int, result_fd: int, output_fd: int, keep: int):
        self.pidfd = os.pidfd_open(pid)
        self.result_fd, self.output_fd, self.keep = result_fd, output_fd, keep
        self.buffer, self.output, self.dropped = bytearray(), bytearray(), 0
        self.open = [result_fd, output_fd]
        self.over_memory = False

    def until(self, deadline: float, memory_limit: int | None = None, at_result: bool = False) -> bool:
        """Read until the process exits (True; with `at_result`, also as soon as a whole
        result frame has come: the scorer's process writes it last) or the deadline passes
        (False). With
        `memory_limit` (bytes; the fallback when there is no memory cgroup), every
        CHECK_SECONDS the private memory of all our descendants is summed: past the limit,
        `over_memory` is set and we stop as at the deadline."""
        while True:
            wake = deadline if memory_limit is None else min(deadline, time.monotonic() + CHECK_SECONDS)
            ready = protocol.wait_readable([self.pidfd, *self.open], wake)
            if not ready:
                if wake < deadline and time.monotonic() < deadline:
                    if private_memory(descendants(os.getpid())) <= memory_limit:  # type: ignore[operator]
                        continue
                    self.over_memory = True
                return False
            for fd in ready:
                if fd != self.pidfd:
                    self._read(fd)
            if self.pidfd in ready or (at_result and self.complete()):
                return True

    def complete(self) -> bool:
        """A whole result frame has come (its writer exits next)."""
        return len(self.buffer) >= 4 and len(self.buffer) >= 4 + int.from_bytes(self.buffer[:4], "big")

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
        except protocol.BadFrame as error:
            return {"failure": ["bad_output", f"the evaluation wrote a malformed result: {error}"]}
        if self.buffer and not (isinstance(message, dict) and ("scores" in message or "failure" in message)):
            return {"failure": ["bad_output", "the evaluation wrote a malformed result"]}
        return message

    def text(self) -> str:
        text = self.output.decode("utf-8", "replace")
        return text + (f"\n[... {self.dropped} more bytes of output dropped]" if self.dropped else "")


