"""PNG plots of a comparison (matplotlib, the `plots` extra): best@k curves, the reward-space
scatter with each policy's Pareto front, and best-so-far curves of the evolutionary search."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from evo import metrics


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, figure, axis, path: Path) -> Path:
    axis.legend()
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def best_at_k(rows: dict[str, dict], ks: Sequence[int], path: Path) -> Path:
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(5, 3.6))
    for name, row in rows.items():
        means = [row[f"best@{k}"]["mean"] for k in ks]
        lows = [row[f"best@{k}"]["ci95"][0] for k in ks]
        highs = [row[f"best@{k}"]["ci95"][1] for k in ks]
        axis.plot(ks, means, marker="o", label=name)
        axis.fill_between(ks, lows, highs, alpha=0.2)
    axis.set_xscale("log")
    axis.set_xticks(list(ks), [str(k) for k in ks])
    axis.set_xlabel("k (candidate answers)")
    axis.set_ylabel("best@k (scalar)")
    return _save(plt, figure, axis, path)


def most_spread_pair(vectors: dict[str, np.ndarray]) -> tuple[int, int]:
    """The two objectives with the largest spread over every policy's valid candidates."""
    pooled = np.concatenate([v.reshape(-1, v.shape[-1]) for v in vectors.values()])
    pooled = pooled[pooled.any(axis=1)]
    if len(pooled) == 0 or pooled.shape[1] < 2:
        return 0, min(1, pooled.shape[1] - 1)
    first, second = np.argsort(-metrics.spread(pooled))[:2]
    return int(min(first, second)), int(max(first, second))


def richest_instance(vectors: dict[str, np.ndarray]) -> int:
    """The instance with the most valid (non-zero) candidates over every policy."""
    return int(np.argmax(sum(v.any(axis=2).sum(axis=1) for v in vectors.values())))


def reward_scatter(vectors: dict[str, np.ndarray], objectives: Sequence[str], path: Path) -> Path:
    """The candidates of the richest instance in the two objectives that spread most over
    all instances, each policy's Pareto front joined."""
    plt = _pyplot()
    x, y = most_spread_pair(vectors)
    instance = richest_instance(vectors)
    figure, axis = plt.subplots(figsize=(4.6, 4.2))
    rng = np.random.default_rng(0)
    for name, v in vectors.items():
        pool = v[instance]
        pool = pool[pool.any(axis=1)]
        jitter = rng.normal(0, 0.01, size=(len(pool), 2))
        points = axis.scatter(pool[:, x] + jitter[:, 0], pool[:, y] + jitter[:, 1], alpha=0.5, s=18, label=name)
        front = np.unique(pool[metrics.pareto_mask(pool[:, [x, y]])][:, [x, y]], axis=0) if len(pool) else pool
        if len(front):
            order = np.argsort(front[:, 0])
            axis.plot(front[order, 0], front[order, 1], color=points.get_facecolor()[0], alpha=0.9)
    axis.set_xlabel(objectives[x])
    axis.set_ylabel(objectives[y])
    axis.set_title(f"reward space, instance {instance}")
    return _save(plt, figure, axis, path)


def evolution(curves: dict[str, np.ndarray], path: Path, ylabel: str = "best scalar so far (fraction of optimum)",
              xlabel: str = "programs proposed", x: np.ndarray | None = None) -> Path:
    """Mean of per-run curves (best-so-far over instances and seeds, or any (runs, budget)
    curve) against the budget (programs proposed), with the interquartile range."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(5, 3.6))
    for name, curve in curves.items():  # (runs, budget)
        calls = np.arange(1, curve.shape[1] + 1) if x is None else x
        axis.plot(calls, curve.mean(axis=0), label=name)
        axis.fill_between(calls, np.percentile(curve, 25, axis=0), np.percentile(curve, 75, axis=0), alpha=0.2)
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    return _save(plt, figure, axis, path)
