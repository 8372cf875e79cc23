"""Scorer for the function-minimization example: one objective per test function, each in
[0, 1] (1 = the global minimum found), averaged over a few seeds. Each seed moves the
function's minimum by a hidden shift, so a program cannot just return a known optimum.

`f` takes one point (shape (dim,), returns a float) or a batch of k points (shape (k, dim),
returns k values, counted as k calls): each call crosses from the candidate's process to
this one, so a batch of points costs one round trip instead of k."""

from __future__ import annotations

import math

import numpy as np

from evo.sandbox import candidate

DIM, BUDGET, SEEDS = 5, 500, (0, 1, 2)


def sphere(x):
    return np.sum(x**2, axis=-1)


def rastrigin(x):
    return 10 * x.shape[-1] + np.sum(x**2 - 10 * np.cos(2 * np.pi * x), axis=-1)


def rosenbrock(x):
    return np.sum(100 * (x[..., 1:] - x[..., :-1] ** 2) ** 2 + (1 - x[..., :-1]) ** 2, axis=-1)


def ackley(x):
    n = x.shape[-1]
    return (-20 * np.exp(-0.2 * np.sqrt(np.sum(x**2, axis=-1) / n)) - np.exp(np.sum(np.cos(2 * np.pi * x), axis=-1) / n)
            + 20 + math.e)


# name: (function, bounds, the gap to the minimum (0) that scores 0.5)
PROBLEMS = {
    "sphere": (sphere, (-5.0, 5.0), 1.0),
    "rastrigin": (rastrigin, (-5.12, 5.12), 10.0),
    "rosenbrock": (rosenbrock, (-2.0, 2.0), 10.0),
    "ackley": (ackley, (-32.0, 32.0), 5.0),
}


class BudgetExceeded(Exception):
    pass


def _counted(f, budget):
    calls = [0]

    def wrapped(x):
        x = np.asarray(x, dtype=np.float64)
        if x.shape[-1:] != (DIM,) or x.ndim > 2 or x.size == 0 or not np.all(np.isfinite(x)):
            raise ValueError(f"expected finite points of shape ({DIM},) or (k, {DIM}), got {x.shape}")
        calls[0] += 1 if x.ndim == 1 else len(x)
        if calls[0] > budget:
            raise BudgetExceeded(f"more than {budget} calls")
        y = f(x)
        return float(y) if x.ndim == 1 else y

    return wrapped, calls


def _load(path):
    return candidate.load(path).minimize  # runs in the candidate's own process; f runs here


def _point(answer, low, high):
    """The candidate's answer as a point in the box, or None (None, NaN, wrong shape...)."""
    try:
        x = np.asarray(answer, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    if x.shape != (DIM,) or not np.all(np.isfinite(x)):
        return None
    return np.clip(x, low, high)


def _shifted(f, shift):
    """The same landscape with its minimum moved by `shift` (so no point is known to be best)."""
    return lambda x: f(x - shift)


def evaluate(path):
    minimize = _load(path)
    scores, calls_used = {}, []
    for name, (f, (low, high), half) in PROBLEMS.items():
        values = []
        for seed in SEEDS:
            shift = np.random.default_rng(1000 + seed).uniform(low, high, DIM) * 0.4
            g = _shifted(f, shift)
            wrapped, calls = _counted(g, BUDGET)
            x = _point(minimize(wrapped, DIM, (low, high), BUDGET, np.random.default_rng(seed)), low, high)
            gap = float(g(x)) if x is not None else math.inf
            values.append(half / (half + gap) if math.isfinite(gap) and gap >= 0 else 0.0)
            calls_used.append(calls[0] / BUDGET)
        scores[name] = float(np.mean(values))
    scores["budget_used"] = float(np.mean(calls_used))
    return scores
