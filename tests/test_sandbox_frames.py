"""The checks on what crosses a pipe: frames (protocol.decode) and the values a scorer and
its candidate exchange (values.pack / unpack), pure and fast."""

import json
import time

import numpy as np
import pytest

from evo.sandbox import protocol
from evo.sandbox.values import Unsendable, pack, unpack
from evo.scores import BadOutput, to_vector


@pytest.mark.parametrize("data", [
    b"[" * 200_000 + b"]" * 200_000,  # deeper than the parser's recursion limit
    b"[" * 100 + b"]" * 100,  # deeper than MAX_DEPTH
    b'{"a": NaN}', b"Infinity", b"\xff\xfe", b"{", b"",
])
def test_malformed_frames_are_bad_frames_quickly(data):
    start = time.perf_counter()
    with pytest.raises(protocol.BadFrame):
        protocol.decode(data)
    assert time.perf_counter() - start < 1.0


def test_bounded_frames_decode_and_nan_only_where_allowed():
    assert protocol.decode(b'{"scores": [1, 2.5], "extras": {}}') == {"scores": [1, 2.5], "extras": {}}
    assert np.isnan(protocol.decode(b"[NaN]", nan=True)[0])
    assert protocol.decode(json.dumps([[[1]]] * 1000).encode()) == [[[1]]] * 1000


def test_recv_refuses_a_frame_over_its_limit_unread():
    import os

    read, write = os.pipe()
    os.write(write, b"\xff\xff\xff\xff")
    with pytest.raises(protocol.BadFrame, match="larger than the limit"):
        protocol.recv(read, None, limit=1 << 20)
    os.close(read), os.close(write)


def test_values_round_trip_exactly():
    callables = []
    rng = np.random.default_rng(7)
    value = [np.arange(6, dtype=np.float64).reshape(2, 3) / 3, (1, "x"), {"k": np.int32(4)}, None, True, rng, len]
    wire = json.loads(json.dumps(pack(value, callables)))
    back = unpack(wire, lambda i: ("callback", i))
    assert np.array_equal(back[0], value[0]) and back[0].dtype == np.float64
    assert back[1:5] == [(1, "x"), {"k": 4}, None, True] and type(back[1]) is tuple
    keyed = {5: "banana", "a": (1, 2), (1, "t"): [None], "__x": 1.5}  # (HumanEval passes such dicts)
    assert unpack(json.loads(json.dumps(pack(keyed)))) == keyed
    assert back[5].uniform() == np.random.default_rng(7).uniform() and back[6] == ("callback", 0) and callables == [len]


@pytest.mark.parametrize("value", [object(), np.array([object()]), {object(): 2}, {1: len}, len, np.random.default_rng()])
def test_what_cannot_leave_a_candidate_is_refused(value):
    with pytest.raises(Unsendable):
        pack(value)  # (no callables or generators from the candidate's side)


@pytest.mark.parametrize("wire", [
    {"__ndarray__": "AAAA", "dtype": "|O", "shape": [1]},
    {"__ndarray__": "AAAA", "dtype": "<f8", "shape": [5]},
    {"__ndarray__": "!!", "dtype": "<f8", "shape": [0]},
    {"__callable__": 0}, {"__generator__": {"bit_generator": "os.system"}},
    {"__items__": [[[1], 2]]}, {"__items__": [[1]]}, {"__tuple__": 1},
])
def test_malformed_values_from_a_candidate_are_refused(wire):
    with pytest.raises((Unsendable, ValueError)):
        unpack(wire)


@pytest.mark.parametrize("raw", [
    {"a": 10 ** 400}, {"a": 1e101}, {"a": -float("inf")}, {"a": 1.0, **{f"x{i}": 1.0 for i in range(300)}},
    {"a": 1.0, "k" * 201: 1.0}, {"a": 1.0, 5: 1.0}, [10 ** 400], np.ones(10 ** 6),
])
def test_results_out_of_range_or_too_big_are_bad_output_quickly(raw):
    start = time.perf_counter()
    with pytest.raises(BadOutput):
        to_vector(raw, ("a",))
    assert time.perf_counter() - start < 0.5
