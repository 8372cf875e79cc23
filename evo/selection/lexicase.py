"""Lexicase selection and its variants over a prepared `Population`.

One selection event shuffles the cases and keeps, case by case, the candidates that are best
(or within epsilon of the best) until one signature is left or the cases run out; the winner
is drawn among the survivors in proportion to their number of members. The surviving pool
depends only on the case order, so pools after the first `MEMO_DEPTH` cases are cached per
population: at most d + d(d-1) pools, each much smaller than the population.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from evo.errors import UserError
from evo.selection.population import Population, as_population

MEMO_DEPTH = 2
VARIANTS = ("static", "semi-dynamic", "dynamic")

# keep(case, pool of signature indices, None for all) -> a boolean mask over the pool
Keep = Callable[[int, "np.ndarray | None"], np.ndarray]


def median(values: np.ndarray) -> float:
    """np.median of a 1-D array, without its overhead."""
    half = len(values) // 2
    if len(values) % 2:
        return float(np.partition(values, half)[half])
    both = np.partition(values, (half - 1, half))
    return float(both[half - 1] + both[half]) / 2


def mad(values: np.ndarray) -> float:
    """Median absolute deviation from the median."""
    return median(np.abs(values - median(values)))


def population_mad(pop: Population) -> np.ndarray:
    """Each case's MAD over the members (duplicates counted)."""
    if "mad" not in pop.cache:
        members = np.ascontiguousarray(pop.scores.T) if pop.grouped else pop.columns
        pop.cache["mad"] = np.array([mad(case) for case in members])
    return pop.cache["mad"]


def final_pool(pop: Population, order: list[int], keep: Keep, memo: dict) -> np.ndarray:
    """Unique-row indices that survive filtering by the cases in `order`."""
    pool: np.ndarray | None = None
    for t, case in enumerate(order):
        key = tuple(order[: t + 1]) if t < MEMO_DEPTH else None
        hit = memo.get(key) if key is not None else None
        if hit is not None:
            pool = hit
        else:
            mask = keep(case, pool)
            pool = np.flatnonzero(mask) if pool is None else pool[mask]
            if key is not None:
                memo[key] = pool
        if len(pool) == 1:
            break
    return np.arange(pop.u) if pool is None else pool


def run_events(pop: Population, orders: list[list[int]], keep: Keep, memo: dict, rng: np.random.Generator) -> np.ndarray:
    rows = np.fromiter((pop.weighted_row(final_pool(pop, order, keep, memo), rng) for order in orders), np.intp, len(orders))
    return pop.members(rows, rng)


def _orders(d: int, k: int, rng: np.random.Generator, cases: np.ndarray | None = None) -> list[list[int]]:
    cases = np.arange(d) if cases is None else cases
    return cases[rng.random((k, len(cases))).argsort(axis=1)].tolist()


def column(pop: Population, case: int, pool: np.ndarray | None) -> np.ndarray:
    return pop.columns[case] if pool is None else pop.columns[case][pool]


def exact_keep(pop: Population) -> Keep:
    """Plain lexicase: the best on the case."""

    def keep(case: int, pool: np.ndarray | None) -> np.ndarray:
        values = column(pop, case, pool)
        return values == values.max()

    return keep


def within_keep(pop: Population, eps: np.ndarray) -> Keep:
    """Semi-dynamic epsilon: within a fixed epsilon of the pool's best."""

    def keep(case: int, pool: np.ndarray | None) -> np.ndarray:
        values = column(pop, case, pool)
        return values >= values.max() - eps[case]

    return keep


def _memo(pop: Population, key: object) -> dict:
    return pop.cache.setdefault(("lexicase-memo", key), {})


def lexicase(scores: Population | np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Plain lexicase: keep the candidates with the best value on each case in a random order."""
    pop = as_population(scores)
    return run_events(pop, _orders(pop.d, k, rng), exact_keep(pop), _memo(pop, "exact"), rng)


def _epsilons(pop: Population, epsilon: float | np.ndarray | None) -> np.ndarray:
    if epsilon is None:
        return population_mad(pop)
    eps = np.broadcast_to(np.asarray(epsilon, dtype=np.float64), (pop.d,))
    if (eps < 0).any() or not np.isfinite(eps).all():
        raise UserError(f"epsilon must be finite and >= 0, got {epsilon!r}")
    return eps


def weighted_median(ordered: np.ndarray, counts: np.ndarray) -> float:
    """np.median of `ordered` (ascending) with each value repeated counts times."""
    cumulative = np.cumsum(counts)
    total = int(cumulative[-1])
    low, high = np.searchsorted(cumulative, [(total - 1) // 2, total // 2], side="right")
    return float(ordered[low] + ordered[high]) / 2


def _levels(pop: Population, case: int, most: int = 64) -> tuple[np.ndarray, np.ndarray] | None:
    """(distinct values, code of each signature) for a case with few distinct values, else None."""
    key = ("levels", case)
    if key not in pop.cache:
        levels, codes = np.unique(pop.columns[case], return_inverse=True)
        pop.cache[key] = (levels, codes.ravel()) if len(levels) <= most else None
    return pop.cache[key]


def _dynamic_keep(pop: Population) -> Keep:
    """Dynamic epsilon: within the pool's own MAD of the pool's best."""

    def keep(case: int, pool: np.ndarray | None) -> np.ndarray:
        levels = _levels(pop, case)
        if levels is None:
            values = column(pop, case, pool)
            members = values if pop.u == pop.n else np.repeat(values, column_counts(pop, pool))
            return values >= values.max() - mad(members)
        if len(levels[0]) <= 2:  # two values: the MAD is below their gap, so this is exact
            values = column(pop, case, pool)
            return values == values.max()
        codes = levels[1] if pool is None else levels[1][pool]  # few values: work on a histogram
        weights = None if pop.u == pop.n else column_counts(pop, pool)
        hist = np.bincount(codes, weights=weights, minlength=len(levels[0]))
        return codes >= _histogram_cutoff(levels[0], hist)

    return keep


def column_counts(pop: Population, pool: np.ndarray | None) -> np.ndarray:
    return pop.counts if pool is None else pop.counts[pool]


def _histogram_cutoff(levels: np.ndarray, hist: np.ndarray) -> int:
    """The first level kept by 'value >= max - MAD', for a pool given as a histogram over levels."""
    top = levels[np.flatnonzero(hist)[-1]]
    centre = weighted_median(levels, hist)
    deviation = np.abs(levels - centre)
    order = np.argsort(deviation, kind="stable")
    spread = weighted_median(deviation[order], hist[order])
    return int(np.searchsorted(levels, top - spread, side="left"))


def _static_population(pop: Population, eps: np.ndarray) -> Population:
    """Static epsilon-lexicase = plain lexicase on 'within epsilon of the population's best'."""
    key = ("static", eps.tobytes())
    if key not in pop.cache:
        passed = pop.scores >= pop.scores.max(axis=0) - eps
        pop.cache[key] = Population(passed.astype(np.float64), grouped=pop.grouped)
    return pop.cache[key]


def epsilon_lexicase(
    scores: Population | np.ndarray,
    k: int,
    rng: np.random.Generator,
    variant: str = "semi-dynamic",
    epsilon: float | np.ndarray | None = None,
) -> np.ndarray:
    """Epsilon-lexicase (La Cava et al.); epsilon defaults to each case's MAD.

    static: a candidate passes a case when within epsilon of the POPULATION's best (population
    MAD); semi-dynamic: within epsilon (population MAD) of the current POOL's best; dynamic:
    within the current pool's own MAD of the pool's best (`epsilon` is ignored).
    """
    pop = as_population(scores)
    if variant not in VARIANTS:
        raise UserError(f"epsilon-lexicase variant must be one of {', '.join(VARIANTS)}; got {variant!r}")
    if variant == "dynamic":
        return run_events(pop, _orders(pop.d, k, rng), _dynamic_keep(pop), _memo(pop, "dynamic"), rng)
    eps = _epsilons(pop, epsilon)
    if variant == "static":
        return lexicase(_static_population(pop, eps), k, rng)

    return run_events(pop, _orders(pop.d, k, rng), within_keep(pop, eps), _memo(pop, ("semi", eps.tobytes())), rng)


def downsampled_lexicase(
    scores: Population | np.ndarray,
    k: int,
    rng: np.random.Generator,
    rate: float = 0.25,
    size: int | None = None,
) -> np.ndarray:
    """Lexicase on a random subset of the cases, drawn once per call (one 'generation')."""
    pop = as_population(scores)
    if size is None:
        if not 0.0 < rate <= 1.0:
            raise UserError(f"down-sampling rate must be in (0, 1], got {rate!r}")
        size = max(1, round(rate * pop.d))
    if not 1 <= size <= pop.d:
        raise UserError(f"down-sample size must be in [1, {pop.d}], got {size!r}")
    cases = np.sort(rng.choice(pop.d, size, replace=False))
    return run_events(pop, _orders(pop.d, k, rng, cases), exact_keep(pop), _memo(pop, "exact"), rng)
