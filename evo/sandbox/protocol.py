"""Length-prefixed JSON frames over pipes, with deadlines (never pickle: the other end may
be hostile). Every frame is checked in time and memory bounded by its size before use:
`decode` turns anything malformed (bad JSON, NaN, nesting deeper than MAX_DEPTH, more than
MAX_NODES values) into `BadFrame`."""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any

_HEADER = struct.Struct(">I")
MAX_FRAME = 256 * 1024 * 1024
MAX_DEPTH = 64  # nesting of lists and objects
MAX_NODES = 4_000_000  # values in one frame (a candidate's array arguments are one string each)


class Closed(EOFError):
    """The other end closed the pipe (the process died)."""


class BadFrame(ValueError):
    """A frame that is not a well-formed, bounded JSON message."""


_ENCODER = json.JSONEncoder(allow_nan=False)  # bound now: an evaluation may patch json.dumps
_ENCODER_NAN = json.JSONEncoder()  # the candidate channel: a scorer must see a candidate's NaN


def _no_constant(name: str) -> Any:
    raise BadFrame(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)
_DECODER_NAN = json.JSONDecoder()


def encode(message: Any, nan: bool = False) -> bytes:
    data = (_ENCODER_NAN if nan else _ENCODER).encode(message).encode()
    return _HEADER.pack(len(data)) + data


def decode(data: bytes, nan: bool = False) -> Any:
    """The message in `data`, checked; BadFrame when it is not a bounded JSON value (with
    `nan`, NaN and infinities are allowed)."""
    try:
        message = (_DECODER_NAN if nan else _DECODER).decode(data.decode("utf-8"))
    except BadFrame:
        raise
    except (ValueError, RecursionError, MemoryError) as error:  # (UnicodeDecodeError is a ValueError)
        raise BadFrame(f"not a JSON frame ({type(error).__name__})") from None
    if data.count(b"[") + data.count(b"{") > MAX_DEPTH or len(data) > MAX_NODES:  # (else it cannot be too deep or big)
        _check_shape(message)
    return message


def _check_shape(message: Any) -> None:
    """Depth and size, without recursion (the JSON parser already bounds depth by the
    interpreter's recursion limit, about 1000)."""
    stack, nodes = [(message, 0)], 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if depth > MAX_DEPTH or nodes > MAX_NODES:
            raise BadFrame(f"frame nested deeper than {MAX_DEPTH} or larger than {MAX_NODES} values")
        if isinstance(value, dict):
            stack.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)


def send(fd: int, message: Any, nan: bool = False) -> None:
    view = memoryview(encode(message, nan))
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


def recv(fd: int, deadline: float | None = None, limit: int = MAX_FRAME, nan: bool = False) -> Any:
    """One message; raises Closed on EOF, TimeoutError past `deadline` (time.monotonic) and
    BadFrame on a frame over `limit` bytes (unread: the stream is unusable after that) or a
    malformed one."""
    (size,) = _HEADER.unpack(_read(fd, _HEADER.size, deadline))
    if size > limit:
        raise BadFrame(f"frame of {size} bytes is larger than the limit of {limit}")
    return decode(_read(fd, size, deadline), nan)


def decode_first(buffer: bytes) -> Any | None:
    """The first complete frame in `buffer`, or None; BadFrame when it is malformed."""
    if len(buffer) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack_from(buffer)
    if len(buffer) < _HEADER.size + size:
        return None
    return decode(buffer[_HEADER.size : _HEADER.size + size])
