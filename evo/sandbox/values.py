"""JSON-sized values between a scorer and its candidate's process: None, bools, numbers
(NaN and infinities included: the scorer judges them), strings, lists, tuples (HumanEval's
answers compare with them), dicts (keys of these types but lists and dicts), numpy arrays of plain numeric dtypes (sent as raw bytes,
exactly), numpy scalars (as Python numbers) and, from the scorer only, numpy random
generators (their state) and callables (called back in the scorer's process)."""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from typing import Any

import numpy as np

MAX_DEPTH = 32
_DTYPES = {np.dtype(t).str for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                                     "float32", "float64")}
_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


class Unsendable(TypeError):
    """A value that cannot cross to the other process."""


def pack(value: Any, callables: list[Callable] | None = None, depth: int = 0) -> Any:
    """A JSON-able form of `value`; callables are appended to `callables` (None: refused)."""
    if depth > MAX_DEPTH:
        raise Unsendable(f"nested deeper than {MAX_DEPTH}")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return pack(value.item(), callables, depth)
    if isinstance(value, np.ndarray):
        if value.dtype.str not in _DTYPES:
            raise Unsendable(f"an array of dtype {value.dtype}")
        data = base64.b64encode(np.ascontiguousarray(value).tobytes()).decode()
        return {"__ndarray__": data, "dtype": value.dtype.str, "shape": list(value.shape)}
    if isinstance(value, list):
        return [pack(item, callables, depth + 1) for item in value]
    if isinstance(value, tuple):
        return {"__tuple__": [pack(item, callables, depth + 2) for item in value]}  # (two levels of JSON)
    if isinstance(value, dict):
        if all(isinstance(key, str) and not key.startswith("__") for key in value):
            return {key: pack(item, callables, depth + 1) for key, item in value.items()}
        return {"__items__": [[pack(key, None, depth + 2), pack(item, callables, depth + 2)] for key, item in value.items()]}
    if isinstance(value, np.random.Generator) and callables is not None:
        return {"__generator__": value.bit_generator.state}
    if callable(value) and callables is not None:
        callables.append(value)
        return {"__callable__": len(callables) - 1}
    raise Unsendable(f"a {type(value).__name__}")


def unpack(value: Any, callback: Callable[[int], Callable] | None = None) -> Any:
    """The inverse of `pack` for a checked frame; `callback(i)` makes the stand-in for the
    i-th callable (None: refused). Raises Unsendable on anything malformed."""
    if isinstance(value, list):
        return [unpack(item, callback) for item in value]
    if not isinstance(value, dict):
        return value
    if "__ndarray__" in value:
        return _array(value)
    if "__tuple__" in value and isinstance(value["__tuple__"], list) and len(value) == 1:
        return tuple(unpack(item, callback) for item in value["__tuple__"])
    if "__items__" in value and isinstance(value["__items__"], list) and len(value) == 1:
        return _items(value["__items__"], callback)
    if "__generator__" in value and callback is not None:
        return _generator(value["__generator__"])
    if "__callable__" in value and callback is not None and isinstance(value["__callable__"], int):
        return callback(value["__callable__"])
    if any(key.startswith("__") for key in value):
        raise Unsendable("a dict with a reserved key")
    return {key: unpack(item, callback) for key, item in value.items()}


def _items(pairs: list, callback: Callable[[int], Callable] | None) -> dict:
    if not all(isinstance(pair, list) and len(pair) == 2 for pair in pairs):
        raise Unsendable("a malformed dict")
    try:
        return {unpack(key): unpack(item, callback) for key, item in pairs}
    except TypeError:  # (a key that cannot be one: a list, a dict)
        raise Unsendable("a dict with an unhashable key") from None


def _array(value: dict) -> np.ndarray:
    dtype, shape, data = value.get("dtype"), value.get("shape"), value.get("__ndarray__")
    if dtype not in _DTYPES or not isinstance(shape, list) or not isinstance(data, str) or len(shape) > MAX_DEPTH:
        raise Unsendable("a malformed array")
    if not all(isinstance(n, int) and 0 <= n for n in shape):
        raise Unsendable("a malformed array shape")
    raw = base64.b64decode(data, validate=True)
    count = len(raw) // np.dtype(dtype).itemsize
    if count != math.prod(shape):
        raise Unsendable("an array whose data does not match its shape")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _generator(state: Any) -> np.random.Generator:
    name = state.get("bit_generator") if isinstance(state, dict) else None
    if name not in _GENERATORS:
        raise Unsendable("an unknown random generator")
    bits = getattr(np.random, name)()
    bits.state = state
    return np.random.Generator(bits)
