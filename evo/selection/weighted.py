"""Selection by scalar scores: uniform, tournament, Boltzmann (FunSearch), DALex, Dirichlet."""

from __future__ import annotations

import numpy as np

from evo.errors import UserError
from evo.selection.population import Population, as_population

def uniform(scores: Population | np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    pop = as_population(scores)
    return rng.integers(pop.n, size=k)


def tournament(scores: Population | np.ndarray, k: int, rng: np.random.Generator, size: int = 2) -> np.ndarray:
    """k tournaments of `size` members drawn with replacement; the best scalar wins (ties: random)."""
    pop = as_population(scores)
    if size < 1:
        raise UserError(f"tournament size must be >= 1, got {size!r}")
    entrants = rng.integers(pop.n, size=(k, size))
    return entrants[np.arange(k), pop.member_scalar()[entrants].argmax(axis=1)]


def _length_keys(pop: Population) -> np.ndarray:
    """Per member (grouped by signature): signature index + cumulative within-signature probability.

    Inside a signature, shorter programs are favoured as in FunSearch: softmax of minus the
    length normalized by the signature's (min, max).
    """
    if "length-keys" not in pop.cache:
        group = np.repeat(np.arange(pop.u), pop.counts)
        if pop.lengths is None:
            within = (np.arange(pop.n) - pop.starts[group] + 1) / pop.counts[group]
        else:
            lengths = pop.lengths[pop.order]
            low = np.minimum.reduceat(lengths, pop.starts)[group]
            high = np.maximum.reduceat(lengths, pop.starts)[group]
            p = np.exp(-(lengths - low) / (high + 1e-6))
            total = np.add.reduceat(p, pop.starts)[group]
            cumulative = np.cumsum(p)
            before = (cumulative[pop.starts] - p[pop.starts])[group]
            within = (cumulative - before) / total
        pop.cache["length-keys"] = group + within
    return pop.cache["length-keys"]


def boltzmann(
    scores: Population | np.ndarray,
    k: int,
    rng: np.random.Generator,
    temperature: float = 0.1,
    period: int = 30_000,
    programs: int | None = None,
) -> np.ndarray:
    """FunSearch: softmax over score-signature clusters, then favour short programs in a cluster.

    The temperature decays linearly from `temperature` to 0 over `period` programs, then
    restarts: T = temperature * (1 - (programs % period) / period); `programs` defaults to n.
    """
    pop = as_population(scores)
    if temperature <= 0 or period < 1:
        raise UserError(f"boltzmann needs temperature > 0 and period >= 1, got {temperature!r}, {period!r}")
    count = pop.n if programs is None else programs
    t = temperature * (1.0 - (count % period) / period)
    key = ("boltzmann-cdf", t)
    if key not in pop.cache:
        logits = pop.scalar() / t
        pop.cache[key] = np.cumsum(np.exp(logits - logits.max()))
    cdf = pop.cache[key]
    rows = np.minimum(np.searchsorted(cdf, rng.random(k) * cdf[-1], side="right"), pop.u - 1)
    keys = _length_keys(pop)
    positions = np.searchsorted(keys, rows + rng.random(k), side="right")
    positions = np.clip(positions, pop.starts[rows], pop.starts[rows] + pop.counts[rows] - 1)
    return pop.order[positions]


def argmax_rows(pop: Population, w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For each weight vector (row of w), the signature with the largest weighted sum.

    Exact ties between signatures are broken at random in proportion to their members.
    """
    values = w @ pop.columns  # (k, u)
    rows = values.argmax(axis=1)
    tied = values == values[np.arange(len(w)), rows][:, None]
    for pick in np.flatnonzero(np.count_nonzero(tied, axis=1) > 1):
        rows[pick] = pop.weighted_row(np.flatnonzero(tied[pick]), rng)
    return rows


def dalex(scores: Population | np.ndarray, k: int, rng: np.random.Generator, sigma: float = 20.0) -> np.ndarray:
    """DALex: weights = softmax of N(0, sigma^2) draws per selection; argmax of the weighted sum."""
    pop = as_population(scores)
    if not sigma > 0:
        raise UserError(f"dalex sigma must be > 0, got {sigma!r}")
    z = rng.normal(0.0, sigma, size=(k, pop.d))
    w = np.exp(z - z.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    return pop.members(argmax_rows(pop, w, rng), rng)


def dirichlet(scores: Population | np.ndarray, k: int, rng: np.random.Generator, alpha: float = 1.0) -> np.ndarray:
    """Random scalarization: w ~ Dirichlet(alpha * 1_d) per selection; argmax of w . r."""
    pop = as_population(scores)
    if not alpha > 0:
        raise UserError(f"dirichlet alpha must be > 0, got {alpha!r}")
    w = rng.dirichlet(np.full(pop.d, float(alpha)), size=k)
    return pop.members(argmax_rows(pop, w, rng), rng)
