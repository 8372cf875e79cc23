"""Per-instance metrics of a candidate pool, and the comparison table with confidence
intervals (bootstrap over instances) and paired tests against the baseline policy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evo import metrics
from evo.scores import scalarize

SOLVED_TOLERANCE = 1e-9
TOKENS = "tokens"  # a sampling table's cost row: tokens generated per candidate answer (a set's tokens over its m)


def per_instance(vectors: np.ndarray, weights: np.ndarray, optimum: np.ndarray | None, ks: Sequence[int],
                 fronts: Sequence[np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Metric name -> one value per instance, from reward vectors of shape (instances, pool, d).

    best@k is on the scalar (weighted mean); pass@k counts a candidate as correct when its
    scalar reaches the instance's optimum, and best@k/oracle (the largest k) is best@k over
    that optimum (1 where the optimum is 0); diversity_valid is the mean pairwise L1 distance of the pool's valid
    (non-zero) reward vectors, diversity the same over all rows (an invalid candidate's zero
    row counts as a point); Pareto fraction is over the valid candidates.
    """
    scalars = scalarize(vectors, weights)
    pool = scalars.shape[1]
    result: dict[str, np.ndarray] = {}
    for k in ks:
        result[f"best@{k}"] = np.atleast_1d(metrics.best_at_k(scalars, k))
    if optimum is not None:
        correct = (scalars >= np.asarray(optimum)[:, None] - SOLVED_TOLERANCE).sum(axis=1)
        for k in ks:
            result[f"pass@{k}"] = np.array([metrics.pass_at_k(pool, int(c), k) for c in correct])
        top, optimum = max(ks), np.asarray(optimum, dtype=np.float64)
        result[f"best@{top}/oracle"] = np.where(optimum > 0, result[f"best@{top}"] / np.where(optimum > 0, optimum, 1.0), 1.0)
    result["diversity_valid"] = np.array([metrics.diversity(v[v.any(axis=1)]) for v in vectors])
    result["diversity"] = np.array([metrics.diversity(v) for v in vectors])
    result["pareto_fraction"] = np.array([metrics.pareto_fraction(v[v.any(axis=1)]) for v in vectors])
    result["valid"] = vectors.any(axis=2).mean(axis=1)
    if fronts is not None:  # the whole pool's coverage of each instance's front under 256 Dirichlet(1) weightings
        dirichlet = np.random.default_rng(0).dirichlet(np.ones(vectors.shape[2]), size=256)
        result[f"front_coverage@{pool}"] = np.array([metrics.front_coverage(v, f, dirichlet) for v, f in zip(vectors, fronts)])
    return result


def table(per_policy: dict[str, dict[str, np.ndarray]], baseline: str, seed: int = 0) -> dict[str, dict]:
    """Policy -> metric -> {mean, ci95, and (not for the baseline) the paired difference}."""
    rows: dict[str, dict] = {}
    for name, columns in per_policy.items():
        row = {}
        for metric, values in columns.items():
            interval = metrics.bootstrap_ci(values, resamples=2000, seed=seed)
            cell = {"mean": interval.estimate, "ci95": [interval.low, interval.high]}
            if name != baseline:
                test = metrics.paired_test(values, per_policy[baseline][metric], resamples=2000, seed=seed)
                cell["vs_baseline"] = {"difference": test.mean_difference, "ci95": [test.low, test.high], "p": test.p_value}
            row[metric] = cell
        rows[name] = row
    return rows


def markdown(rows: dict[str, dict], baseline: str, instances: int) -> str:
    metrics_order = list(next(iter(rows.values())))
    lines = ["| metric | " + " | ".join(rows) + " |", "|---|" + "---|" * len(rows)]
    for metric in metrics_order:
        cells = []
        for name, row in rows.items():
            cell = row[metric]
            text = f"{cell['mean']:.3f} [{cell['ci95'][0]:.3f}, {cell['ci95'][1]:.3f}]"
            if "vs_baseline" in cell:
                text += f" ({cell['vs_baseline']['difference']:+.3f}, p={cell['vs_baseline']['p']:.2g})"
            cells.append(text)
        lines.append(f"| {metric} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        f"Means over {instances} held-out instances with 95% bootstrap intervals; in parentheses the paired "
        f"difference to `{baseline}` and its Wilcoxon signed-rank p-value."
    )
    return "\n".join(lines) + "\n"
