"""The Pareto front of a set of score vectors (higher is better)."""

from __future__ import annotations

import numpy as np


def pareto_mask(vectors: np.ndarray, block: int = 256) -> np.ndarray:
    """True for each row no other row dominates (>= everywhere, > somewhere); equal rows all stay.

    Rows are visited in decreasing order of their sum: a row can only be dominated by a row
    with a larger sum, and if by any, then by one already on the front.
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    order = np.argsort(-vectors.sum(axis=1), kind="stable")
    front = np.empty((0, vectors.shape[1]))
    keep = np.zeros(len(vectors), dtype=bool)
    for start in range(0, len(order), block):
        chunk = order[start : start + block]
        rows = vectors[chunk]
        alive = ~_dominated_by(rows, front)
        inner = _dominated_by(rows, rows)
        alive &= ~inner
        keep[chunk[alive]] = True
        front = np.vstack([front, rows[alive]])
    return keep


def _dominated_by(rows: np.ndarray, others: np.ndarray) -> np.ndarray:
    if not len(others):
        return np.zeros(len(rows), dtype=bool)
    ge = (others[None, :, :] >= rows[:, None, :]).all(axis=2)
    gt = (others[None, :, :] > rows[:, None, :]).any(axis=2)
    return (ge & gt).any(axis=1)
