"""Length-prefixed JSON frames over pipes, with deadlines (never pickle: the other end may
be hostile)."""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

_HEADER = struct.Struct(">I")
MAX_FRAME = 256 * 1024 * 1024


class Closed(EOFError):
    """The other end closed the pipe (the process died)."""


_ENCODER = json.JSONEncoder(allow_nan=False)  # bound now: an evaluation may patch json.dumps


def encode(message: Any) -> bytes:
    data = _ENCODER.encode(message).encode()
    return _HEADER.pack(len(data)) + data


def send(fd: int, message: Any) -> None:
    view = memoryview(encode(message))
    while view:
        view = view[os.write(fd, view):]


def wait_readable(fds: list[int], deadline: float) -> list[int]:
    """The readable fds, or [] once `deadline` (time.monotonic) has passed."""
    while True:
        wait = deadline - time.monotonic()
        if wait <= 0:
            return []
        ready = select.select(fds, [], [], min(wait, 3600.0))[0]  # select overflows on huge waits
        if ready:
            return ready


def _read(fd: int, size: int, deadline: float | None) -> bytes:
    chunks, left = [], size
    while left:
        if deadline is not None and not wait_readable([fd], deadline):
            raise TimeoutError("no answer before the deadline")
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise Closed("pipe closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv(fd: int, deadline: float | None = None) -> Any:
    """One message; raises Closed on EOF and TimeoutError past `deadline` (time.monotonic)."""
    (size,) = _HEADER.unpack(_read(fd, _HEADER.size, deadline))
    if size > MAX_FRAME:
        raise Closed(f"frame of {size} bytes is too large")
    return json.loads(_read(fd, size, deadline))


def decode_first(buffer: bytes) -> Any | None:
    """The first complete frame in `buffer`, or None."""
    if len(buffer) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack_from(buffer)
    if len(buffer) < _HEADER.size + size:
        return None
    return json.loads(buffer[_HEADER.size : _HEADER.size + size])
