"""Pure metrics over samples and reward vectors: pass@k, best@k, diversity, Pareto, front coverage,
hypervolume, and bootstrap confidence intervals with a paired test across instances."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Codex): 1 - C(n-c, k) / C(n, k), in the stable product form."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def best_at_k_weights(n: int, k: int) -> np.ndarray:
    """Weights of the sorted (ascending) rewards: C(i-1, k-1) / C(n, k) for i = 1..n."""
    if not 1 <= k <= n:
        raise ValueError(f"best_at_k needs 1 <= k <= n; got n={n}, k={k}")
    i = np.arange(1, n + 1)
    from scipy.special import gammaln  # (scipy on first use: the database imports this module)

    log_c = lambda a, b: gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)  # noqa: E731
    weights = np.zeros(n)
    valid = i >= k
    weights[valid] = np.exp(log_c(i[valid] - 1, k - 1) - log_c(n, k))
    return weights


def best_at_k(rewards: np.ndarray, k: int) -> np.ndarray | float:
    """Unbiased expected best of k candidates drawn without replacement from n >= k rewards.

    `rewards` is (n,) or (..., n); the estimate is taken over the last axis.
    """
    rewards = np.asarray(rewards, dtype=np.float64)
    result = np.sort(rewards, axis=-1) @ best_at_k_weights(rewards.shape[-1], k)
    return float(result) if np.ndim(result) == 0 else result


def diversity(vectors: np.ndarray) -> float:
    """Reward-space diversity: mean pairwise L1 distance between the rows of (n, d)."""
    vectors = np.asarray(vectors, dtype=np.float64)
    n = len(vectors)
    if n < 2:
        return 0.0
    distances = np.abs(vectors[:, None, :] - vectors[None, :, :]).sum(-1)
    return float(distances.sum() / (n * (n - 1)))


def pareto_mask(vectors: np.ndarray, block: int = 256) -> np.ndarray:
    """True for each row of (n, d) no other row dominates (>= everywhere, > somewhere; higher
    is better); equal rows all stay.

    Rows are visited in decreasing order of their sum: a row can only be dominated by a row
    with a larger sum, and if by any, then by one already on the front.
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    if len(vectors) == 0:
        return np.zeros(0, dtype=bool)
    if vectors.ndim == 2 and vectors.shape[1] == 2 and np.isfinite(vectors).all():
        return _pareto_mask_2d(vectors)
    order = np.argsort(-vectors.sum(axis=1), kind="stable")
    front = np.empty((0, vectors.shape[1]))
    keep = np.zeros(len(vectors), dtype=bool)
    for start in range(0, len(order), block):
        chunk = order[start : start + block]
        rows = vectors[chunk]
        alive = ~_dominated_by(rows, front) & ~_dominated_by(rows, rows)
        keep[chunk[alive]] = True
        front = np.vstack([front, rows[alive]])
    return keep


def front(vectors, d: int | None = None) -> np.ndarray:
    """The front: the distinct rows of `vectors` (n, d) that no row dominates, in the order they
    first appear ((0, d) for no rows; `d` gives the width when `vectors` is empty). The one
    definition of "the Pareto front" in this project: the database's front programs, the
    front F a set is measured against in training, the task oracles' and the reports' fronts."""
    rows = np.asarray([np.asarray(v, dtype=np.float64) for v in vectors] if len(vectors) else np.zeros((0, d or 0)))
    rows = rows.reshape(len(rows), -1)
    kept = rows[pareto_mask(rows)]
    _, first = np.unique(kept, axis=0, return_index=True)
    return kept[np.sort(first)]


def on_front(vectors) -> np.ndarray:
    """True for each row of (n, d) equal to a row of `front(vectors)` (every copy of a front
    vector; -0.0 counts as 0.0): which programs are on the front (`Database.front`, `evo show`,
    the report)."""
    if len(vectors) == 0:
        return np.zeros(0, dtype=bool)
    rows = np.asarray(vectors, dtype=np.float64).reshape(len(vectors), -1) + 0.0  # + 0.0: -0.0 becomes 0.0
    kept = {row.tobytes() for row in front(rows)}
    return np.array([row.tobytes() in kept for row in rows], dtype=bool)


def _pareto_mask_2d(vectors: np.ndarray) -> np.ndarray:
    """`pareto_mask` for two objectives in O(n log n): sorted by x (descending), a row is
    dominated when a row of larger x has a y as large, or a row of the same x a larger y."""
    x, y = vectors[:, 0], vectors[:, 1]
    order = np.lexsort((-y, -x))  # by x descending, then y descending
    xs, ys = x[order], y[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])  # each run of equal x
    group_max = np.maximum.reduceat(ys, starts)  # the first y of each run (y descending within it)
    before = np.r_[-np.inf, np.maximum.accumulate(group_max)[:-1]]  # best y at a strictly larger x
    runs = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(xs)]))
    alive = (ys > before[runs]) & (ys >= group_max[runs])
    keep = np.zeros(len(vectors), dtype=bool)
    keep[order[alive]] = True
    return keep


def _dominated_by(rows: np.ndarray, others: np.ndarray) -> np.ndarray:
    if not len(others):
        return np.zeros(len(rows), dtype=bool)
    ge = np.all(others[None, :, :] >= rows[:, None, :], axis=2)
    gt = np.any(others[None, :, :] > rows[:, None, :], axis=2)
    return np.any(ge & gt, axis=1)


def pareto_fraction(vectors: np.ndarray) -> float:
    mask = pareto_mask(vectors)
    return float(mask.mean()) if len(mask) else 0.0


def distinct_valid(vectors: np.ndarray, decimals: int = 9) -> np.ndarray:
    """The distinct valid (non-zero) rows of (n, d), compared at `decimals` (two forms of one
    function may differ in the last bits)."""
    vectors = np.round(np.asarray(vectors, dtype=np.float64), decimals)
    return np.unique(vectors[vectors.any(axis=1)], axis=0).reshape(-1, vectors.shape[-1])


def front_width(vectors: np.ndarray) -> int:
    """How many distinct non-dominated vectors the valid (non-zero) rows of (n, d) reach: the
    width of a candidate pool's front (0 without a valid row; copies of a vector count once)."""
    return int(pareto_mask(distinct_valid(vectors)).sum())


def front_coverage(vectors: np.ndarray, front: np.ndarray, weights: np.ndarray) -> float:
    """How much of the best achievable trade-off the candidates reach: the mean, over the
    rows w of (W, d) `weights` (e.g. Dirichlet draws), of max_i w . v_i / max_f w . f_f.

    1 means that under every weighting some candidate is as good as the best point of the
    (oracle) `front`; weightings under which the front scores 0 are left out.
    """
    vectors = np.asarray(vectors, dtype=np.float64).reshape(-1, np.shape(weights)[-1])
    best = np.asarray(front, dtype=np.float64) @ np.asarray(weights, dtype=np.float64).T
    if best.size == 0:
        return float("nan")
    best = best.max(axis=0)
    reached = (vectors @ np.asarray(weights, dtype=np.float64).T).max(axis=0) if len(vectors) else np.zeros_like(best)
    scored = best > 0
    return float(np.mean(reached[scored] / best[scored])) if scored.any() else float("nan")


def spread(vectors: np.ndarray) -> np.ndarray:
    """Per-objective spread: the population std of each column of (n, d)."""
    return np.asarray(vectors, dtype=np.float64).std(axis=0)


def hypervolume(vectors: np.ndarray, reference: np.ndarray) -> float:
    """Volume dominated by the rows of (n, d) (maximization) above `reference`, d in 1..4."""
    if not 1 <= np.shape(reference)[0] <= 4:
        raise ValueError(f"hypervolume needs 1 <= d <= 4 (hypervolume_estimate: any d); got a reference of {np.shape(reference)}")
    points, reference = _front_above(vectors, reference)
    return _sweep(points, reference) if len(points) else 0.0


def _front_above(vectors: np.ndarray, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The non-dominated rows of (n, d) `vectors` strictly above the (d,) `reference`, as floats."""
    vectors = np.asarray(vectors, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if vectors.ndim != 2 or reference.ndim != 1 or vectors.shape[1] != reference.shape[0]:
        raise ValueError(f"hypervolume needs (n, d) vectors and a (d,) reference; got {vectors.shape}, {reference.shape}")
    points = vectors[(vectors > reference).all(axis=1)]
    return (points[pareto_mask(points)] if len(points) else points), reference


def hypervolume_estimate(vectors: np.ndarray, reference: np.ndarray, samples: int = 100_000, seed: int = 0) -> float:
    """Monte Carlo hypervolume for any d (the exact sweep above stops at four objectives): the
    share of `samples` uniform points of the box [reference, the rows' maximum] that some row
    dominates, times the box's volume. Deterministic for a seed; the box is the points' own, so
    the share is large and its relative standard error small (one point: exact)."""
    points, reference = _front_above(vectors, reference)
    if len(points) == 0:
        return 0.0
    top = points.max(axis=0)
    box = float(np.prod(top - reference))
    if len(points) == 1:
        return box
    rng, covered = np.random.default_rng(seed), 0
    for start in range(0, samples, 20_000):
        draws = reference + rng.random((min(20_000, samples - start), len(reference))) * (top - reference)
        covered += int((draws[:, None, :] <= points[None, :, :]).all(axis=2).any(axis=1).sum())
    return box * covered / samples


def _sweep(points: np.ndarray, reference: np.ndarray) -> float:
    """Slice along the last objective: each slab's thickness times the (d-1)-volume above it."""
    if points.shape[1] == 1:
        return float(points[:, 0].max() - reference[0])
    levels = np.unique(points[:, -1])[::-1]  # descending
    volume = 0.0
    for level, below in zip(levels, np.append(levels[1:], reference[-1])):
        active = points[points[:, -1] >= level, :-1]
        volume += (level - below) * _sweep(active[pareto_mask(active)], reference[:-1])
    return volume


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float


def bootstrap_ci(
    values: np.ndarray,
    statistic: Callable[..., np.ndarray] = np.mean,
    *,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap interval of `statistic` over the values (one per instance)."""
    values = np.asarray(values, dtype=np.float64)
    estimate = float(statistic(values))
    if len(values) < 2 or np.ptp(values) == 0:
        return Interval(estimate, estimate, estimate)
    from scipy import stats

    result = stats.bootstrap(
        (values,), statistic, confidence_level=confidence, n_resamples=resamples,
        method="percentile", vectorized=True, random_state=np.random.default_rng(seed),
    )
    return Interval(estimate, float(result.confidence_interval.low), float(result.confidence_interval.high))


@dataclass(frozen=True)
class PairedComparison:
    mean_difference: float  # mean of a - b over instances
    low: float
    high: float
    p_value: float  # Wilcoxon signed-rank, two-sided (1.0 when every difference is zero)


def paired_test(a: np.ndarray, b: np.ndarray, *, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0) -> PairedComparison:
    """Compare two methods measured on the same instances: bootstrap CI of the mean
    difference and a Wilcoxon signed-rank test."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired_test needs two 1-D arrays of equal length; got {a.shape} and {b.shape}")
    difference = a - b
    interval = bootstrap_ci(difference, confidence=confidence, resamples=resamples, seed=seed)
    from scipy import stats

    p_value = 1.0 if not difference.any() else float(stats.wilcoxon(difference).pvalue)
    return PairedComparison(interval.estimate, interval.low, interval.high, p_value)
