"""Data for one problem: prompt points, stratified evaluation points, dense held-out points,
and the per-region reward.

The input box is cut into 8 regions (1 variable: 8 intervals; 2: 4 x 2; 3 or more: halves
of the first three). Each region gets the same number of evaluation points, and scores
1 / (1 + RMSE_region / std(y)), so a formula that fits part of the box is a specialist.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tasks.symreg.expressions import compile_expression

REGIONS = 8
PER_REGION = 32
DENSE = 4096


def splits_per_variable(arity: int) -> tuple[int, ...]:
    if arity == 1:
        return (8,)
    if arity == 2:
        return (4, 2)
    return (2, 2, 2) + (1,) * (arity - 3)


def region_boxes(ranges: tuple[tuple[float, float], ...]) -> list[np.ndarray]:
    """The 8 regions as (arity, 2) arrays of [low, high], in row-major order of the cuts."""
    cuts = splits_per_variable(len(ranges))
    edges = [np.linspace(lo, hi, n + 1) for (lo, hi), n in zip(ranges, cuts)]
    boxes = []
    for index in np.ndindex(*cuts):
        boxes.append(np.array([[edges[v][i], edges[v][i + 1]] for v, i in enumerate(index)]))
    return boxes


def uniform(box: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(box[:, 0], box[:, 1], size=(count, len(box)))


@dataclass(frozen=True)
class Dataset:
    """A problem's formula, sampling box and data seed (the arrays come from `arrays`)."""

    formula: str
    ranges: tuple[tuple[float, float], ...]
    seed: int
    prompt_points: int = 20

    @property
    def arity(self) -> int:
        return len(self.ranges)


@dataclass(frozen=True)
class Arrays:
    X_prompt: np.ndarray
    y_prompt: np.ndarray
    X_eval: np.ndarray  # PER_REGION points in each region, region by region
    y_eval: np.ndarray
    region: np.ndarray  # region index of each evaluation point
    X_dense: np.ndarray  # held-out points for exact recovery
    y_dense: np.ndarray


@lru_cache(maxsize=512)
def arrays(data: Dataset) -> Arrays:
    rng = np.random.default_rng(data.seed)
    truth = compile_expression(data.formula, data.arity)
    full = np.array(data.ranges, dtype=np.float64)
    X_prompt = uniform(full, data.prompt_points, rng)
    X_eval = np.concatenate([uniform(box, PER_REGION, rng) for box in region_boxes(data.ranges)])
    X_dense = uniform(full, DENSE, rng)
    return Arrays(X_prompt, truth(X_prompt), X_eval, truth(X_eval), np.repeat(np.arange(REGIONS), PER_REGION),
                  X_dense, truth(X_dense))


def region_scores(prediction: np.ndarray, data: Dataset) -> np.ndarray:
    """Per-region accuracy in [0, 1]; a region with a non-finite prediction scores 0."""
    return accuracy(prediction, arrays(data))


def accuracy(prediction: np.ndarray, table: Arrays) -> np.ndarray:
    """Per-region accuracy 1 / (1 + RMSE_region / std(y)) of predictions at `table.X_eval`; a
    region with a non-finite prediction scores 0, a region without points the accuracy on all.
    Points where the truth itself is not finite (a train formula outside its domain there) are
    left out, and a region with none left scores 0: every score is a number."""
    y = table.y_eval
    known = np.isfinite(y)
    scale = (float(np.std(y[known])) if known.any() else 0.0) or 1.0
    scores = np.zeros(REGIONS)
    for r in range(REGIONS):
        mask = table.region == r
        mask = (mask if mask.any() else np.ones_like(mask)) & known
        error = prediction[mask] - y[mask]
        if mask.any() and np.all(np.isfinite(error)):
            scores[r] = 1.0 / (1.0 + float(np.sqrt(np.mean(error**2))) / scale)
    return scores


def recovered(prediction_on_dense: np.ndarray, data: Dataset, tolerance: float = 1e-6) -> bool:
    """Exact recovery, judged numerically on the dense held-out points."""
    return matches(prediction_on_dense, arrays(data).y_dense, tolerance)


def matches(prediction: np.ndarray, y: np.ndarray, tolerance: float = 1e-6) -> bool:
    """Whether every prediction is finite and within `tolerance` (relative, 1 + |y|) of y."""
    error = np.abs(prediction - y)
    return bool(np.all(np.isfinite(error)) and np.all(error <= tolerance * (1.0 + np.abs(y))))
