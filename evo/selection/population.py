"""A score matrix prepared once per population version, shared by every selection strategy.

Selection strategies only ever compare score rows, so identical rows ("score signatures") are
merged: strategies work on the unique rows and a chosen row becomes a member uniformly among
its duplicates. Everything that does not change between two selections on the same population
(unique rows, tie groups, per-column copies, MADs, lexicase prefixes) is computed once here
and cached in `cache`.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np

def _mix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer, elementwise over uint64 (wrapping arithmetic), in place."""
    shifted = np.empty_like(x)
    for shift, multiplier in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB), (31, None)):
        np.right_shift(x, np.uint64(shift), out=shifted)
        np.bitwise_xor(x, shifted, out=x)
        if multiplier is not None:
            np.multiply(x, np.uint64(multiplier), out=x)
    return x


def signature_keys(scores: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row of an (n, d) float matrix (equal rows, equal keys)."""
    bits = (scores + 0.0).view(np.uint64)  # a fresh copy; + 0.0 maps -0.0 to 0.0
    bits += _mix64(np.arange(1, scores.shape[1] + 1, dtype=np.uint64))  # a salt per column
    return _mix64(bits).sum(axis=1, dtype=np.uint64)


def unique_rows(scores: np.ndarray, keys: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """(first index of each unique row, inverse, counts, members grouped by row), by key, verified.

    One stable sort of the keys groups the rows; rows that share a key are compared exactly.
    """
    keys = signature_keys(scores) if keys is None else keys
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    counts = np.diff(np.append(starts, len(keys)))
    inverse = np.empty(len(keys), dtype=np.intp)
    inverse[order] = np.repeat(np.arange(len(starts)), counts)
    first = order[starts]
    shared = np.flatnonzero(counts[inverse] > 1)  # only rows that share a key can collide
    if not np.array_equal(scores[first[inverse[shared]]], scores[shared]):  # a collision: the slow way
        _, first, inverse, counts = np.unique(scores, axis=0, return_index=True, return_inverse=True, return_counts=True)
        inverse = inverse.ravel()
        order = np.argsort(inverse, kind="stable")
    return first, inverse, counts, order


class Population:
    """Scores (n, d), higher is better, with optional program lengths and scalar weights."""

    def __init__(
        self,
        scores: np.ndarray,
        lengths: np.ndarray | None = None,
        weights: np.ndarray | None = None,
        keys: np.ndarray | None = None,  # signature_keys(scores), when the caller keeps them
        grouped: bool = True,  # False: every member is its own signature (no hashing; one-shot use)
    ):
        scores = np.asarray(scores, dtype=np.float64)
        if scores.ndim != 2 or scores.shape[0] == 0 or scores.shape[1] == 0:
            raise ValueError(f"scores must be a non-empty (n, d) matrix, got shape {scores.shape}")
        if not np.isfinite(scores).all():
            raise ValueError("scores must be finite (failed programs are never selectable)")
        self.scores = np.ascontiguousarray(scores)
        self.n, self.d = scores.shape
        self.keys = keys
        self.grouped = grouped
        self.lengths = None if lengths is None else np.asarray(lengths, dtype=np.float64)
        if self.lengths is not None and self.lengths.shape != (self.n,):
            raise ValueError(f"lengths must have shape ({self.n},), got {self.lengths.shape}")
        w = np.ones(self.d) if weights is None else np.asarray(weights, dtype=np.float64)
        if w.shape != (self.d,) or (w < 0).any() or w.sum() <= 0:
            raise ValueError(f"weights must be {self.d} non-negative numbers with a positive sum")
        self.weights = w / w.sum()
        self.cache: dict[Any, Any] = {}

    @cached_property
    def _signatures(self) -> tuple[np.ndarray, ...]:
        """Computed on first use: uniform and tournament selection never need it."""
        if not self.grouped:
            members, ones = np.arange(self.n), np.ones(self.n, dtype=np.intp)
            return self.scores, np.ascontiguousarray(self.scores.T), members, ones, members, members
        first, inverse, counts, order = unique_rows(self.scores, self.keys)
        unique = np.ascontiguousarray(self.scores[first])
        return unique, np.ascontiguousarray(unique.T), inverse, counts, order, np.cumsum(counts) - counts

    @property
    def unique(self) -> np.ndarray:
        """(u, d): the distinct rows (score signatures)."""
        return self._signatures[0]

    @property
    def columns(self) -> np.ndarray:
        """(d, u): the signatures one contiguous array per case."""
        return self._signatures[1]

    @property
    def inverse(self) -> np.ndarray:
        """Member -> signature."""
        return self._signatures[2]

    @property
    def counts(self) -> np.ndarray:
        """Signature -> number of members."""
        return self._signatures[3]

    @property
    def order(self) -> np.ndarray:
        """Members grouped by signature (stable)."""
        return self._signatures[4]

    @property
    def starts(self) -> np.ndarray:
        """Where each signature's members begin in `order`."""
        return self._signatures[5]

    @property
    def u(self) -> int:
        return len(self.counts)

    def scalar(self) -> np.ndarray:
        """The weighted mean of each unique row."""
        if "scalar" not in self.cache:
            self.cache["scalar"] = self.unique @ self.weights
        return self.cache["scalar"]

    def member_scalar(self) -> np.ndarray:
        if "member_scalar" not in self.cache:
            self.cache["member_scalar"] = self.scores @ self.weights
        return self.cache["member_scalar"]

    def members(self, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A member of each given unique row, uniformly among its duplicates."""
        rows = np.asarray(rows, dtype=np.intp)
        offset = (rng.random(len(rows)) * self.counts[rows]).astype(np.intp)
        return self.order[self.starts[rows] + offset]

    def weighted_row(self, pool: np.ndarray, rng: np.random.Generator) -> int:
        """One unique row of `pool`, with probability proportional to its number of members."""
        if len(pool) == 1:
            return int(pool[0])
        cumulative = np.cumsum(self.counts[pool])
        return int(pool[np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right")])


def as_population(scores: "Population | np.ndarray", **prepare: Any) -> Population:
    if isinstance(scores, Population):
        return scores
    return Population(scores, **prepare)
