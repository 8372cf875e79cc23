"""Selection strategies against brute-force definitions on small matrices."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from evo.errors import UserError
from evo.selection import NAMES, Population, select
from evo.selection.lexicase import _dynamic_keep, _static_population, exact_keep, final_pool, population_mad, within_keep

EPSILON_VARIANTS = ("static", "semi-dynamic", "dynamic")


def matrices(max_n: int = 12, max_d: int = 4, levels: int | None = 3):
    """Small score matrices: few levels (many ties) or arbitrary floats."""
    shapes = st.tuples(st.integers(1, max_n), st.integers(1, max_d))
    if levels is None:
        elements = st.floats(-10, 10, allow_nan=False, width=64)
    else:
        elements = st.integers(0, levels - 1).map(float)
    return shapes.flatmap(lambda shape: arrays(np.float64, shape, elements=elements))


any_matrix = st.one_of(matrices(levels=2), matrices(levels=3), matrices(levels=None))


def dominated(scores: np.ndarray) -> np.ndarray:
    """Brute force: row i is dominated when some row is >= everywhere and > somewhere."""
    ge = (scores[:, None, :] >= scores[None, :, :]).all(axis=2)
    gt = (scores[:, None, :] > scores[None, :, :]).any(axis=2)
    return (ge & gt).any(axis=0)


def brute_pool(scores: np.ndarray, order: list[int], variant: str) -> set[int]:
    """The written definition of (epsilon-)lexicase: filter the individuals case by case."""
    if variant == "static":
        mad = np.median(np.abs(scores - np.median(scores, axis=0)), axis=0)
        scores, variant = (scores >= scores.max(axis=0) - mad).astype(float), "exact"
    pool = np.arange(len(scores))
    for case in order:
        values = scores[pool, case]
        if variant == "exact":
            slack = 0.0
        elif variant == "semi-dynamic":
            slack = np.median(np.abs(scores[:, case] - np.median(scores[:, case])))
        else:
            slack = np.median(np.abs(values - np.median(values)))
        pool = pool[values >= values.max() - slack]
    return set(pool.tolist())


def our_pool(pop: Population, order: list[int], variant: str) -> set[int]:
    if variant == "static":
        pop = _static_population(pop, population_mad(pop))
        keep = exact_keep(pop)
    elif variant == "dynamic":
        keep = _dynamic_keep(pop)
    elif variant == "semi-dynamic":
        keep = within_keep(pop, population_mad(pop))
    else:
        keep = exact_keep(pop)
    rows = final_pool(pop, order, keep, {})
    return set(np.flatnonzero(np.isin(pop.inverse, rows)).tolist())


@settings(max_examples=60, deadline=None)
@given(any_matrix, st.sampled_from(NAMES), st.integers(0, 2**32 - 1))
def test_every_strategy_is_in_range_and_reproducible(scores, name, seed):
    for prepared in (lambda: scores, lambda: Population(scores), lambda: Population(scores, grouped=False)):
        first = select(name, prepared(), 7, np.random.default_rng(seed))
        again = select(name, prepared(), 7, np.random.default_rng(seed))
        assert first.shape == (7,) and first.dtype == np.intp
        assert ((first >= 0) & (first < len(scores))).all()
        assert np.array_equal(first, again)


@settings(max_examples=80, deadline=None)
@given(any_matrix, st.integers(0, 2**32 - 1))
def test_lexicase_returns_only_non_dominated_rows(scores, seed):
    chosen = select("lexicase", scores, 25, np.random.default_rng(seed))
    assert not dominated(scores)[chosen].any()


@settings(max_examples=80, deadline=None)
@given(any_matrix, st.sampled_from(("exact", *EPSILON_VARIANTS)), st.randoms(use_true_random=False))
def test_lexicase_pools_match_the_written_definition(scores, variant, random):
    order = list(range(scores.shape[1]))
    random.shuffle(order)
    assert our_pool(Population(scores), order, variant) == brute_pool(scores, order, variant)
    assert our_pool(Population(scores, grouped=False), order, variant) == brute_pool(scores, order, variant)


@settings(max_examples=40, deadline=None)
@given(matrices(max_n=8, max_d=3, levels=3), st.sampled_from(EPSILON_VARIANTS), st.integers(0, 2**32 - 1))
def test_epsilon_lexicase_picks_only_from_some_case_order(scores, variant, seed):
    possible = set().union(*(brute_pool(scores, list(o), variant) for o in itertools.permutations(range(scores.shape[1]))))
    chosen = select("epsilon-lexicase", scores, 20, np.random.default_rng(seed), variant=variant)
    assert set(chosen.tolist()) <= possible


def lexicase_probabilities(scores: np.ndarray) -> np.ndarray:
    """Exact lexicase selection probabilities: average over all case orders, uniform in the pool."""
    probabilities = np.zeros(len(scores))
    orders = list(itertools.permutations(range(scores.shape[1])))
    for order in orders:
        pool = sorted(brute_pool(scores, list(order), "exact"))
        probabilities[pool] += 1 / len(pool) / len(orders)
    return probabilities


def test_dalex_with_a_large_sigma_approaches_lexicase_frequencies():
    scores = np.array([[2, 0, 1], [2, 1, 0], [0, 2, 2], [1, 2, 0], [1, 1, 1], [0, 0, 2], [2, 0, 1]], dtype=float)
    expected = lexicase_probabilities(scores)

    def distance(sigma: float) -> float:
        chosen = select("dalex", scores, 40_000, np.random.default_rng(1), sigma=sigma)
        return 0.5 * np.abs(np.bincount(chosen, minlength=len(scores)) / len(chosen) - expected).sum()

    # Beyond sigma ~ 10 the later cases' weights fall under float64 resolution (see docs).
    assert distance(0.01) > 0.4 and distance(1.0) > 0.05 and distance(8.0) < 0.03


@settings(max_examples=60, deadline=None)
@given(matrices(levels=5), st.integers(0, 2**32 - 1))
def test_dirichlet_with_a_huge_alpha_is_mean_scalarization(scores, seed):
    chosen = select("dirichlet", scores, 10, np.random.default_rng(seed), alpha=1e12)
    means = scores.mean(axis=1)
    assert np.allclose(means[chosen], means.max(), rtol=0, atol=1e-12)


def test_dirichlet_ties_are_broken_uniformly_over_members():
    scores = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    counts = np.bincount(select("dirichlet", scores, 30_000, np.random.default_rng(0)), minlength=4)
    assert counts[3] == 0 and np.all(np.abs(counts[:3] / 30_000 - 1 / 3) < 0.02)


def test_boltzmann_prefers_better_clusters_and_shorter_programs():
    scores = np.array([[1.0], [1.0], [0.0]])
    lengths = np.array([10.0, 1000.0, 5.0])
    chosen = select("boltzmann", scores, 40_000, np.random.default_rng(0), lengths=lengths, temperature=0.05, period=10**9)
    freq = np.bincount(chosen, minlength=3) / len(chosen)
    cluster_best = 1 / (1 + np.exp(-1 / 0.05))
    short = 1 / (1 + np.exp(-990 / (1000 + 1e-6)))  # FunSearch: softmax(-(len - min) / (max + 1e-6))
    assert freq[0] + freq[1] == pytest.approx(cluster_best, abs=0.01)
    assert freq[0] / (freq[0] + freq[1]) == pytest.approx(short, abs=0.01)


def test_boltzmann_temperature_schedule_restarts_every_period():
    scores = np.array([[1.0], [0.9]])
    rng = np.random.default_rng(0)
    late = np.bincount(select("boltzmann", scores, 20_000, rng, temperature=1.0, period=100, programs=99), minlength=2)
    fresh = np.bincount(select("boltzmann", scores, 20_000, rng, temperature=1.0, period=100, programs=100), minlength=2)
    assert late[0] > 19_900 and 9_000 < fresh[0] < 12_000  # T=0.01 vs T=1.0


def test_tournament_of_the_whole_population_mostly_picks_the_best_scalar():
    scores = np.array([[0.0, 0.0], [1.0, 0.5], [0.2, 0.2]])
    chosen = select("tournament", scores, 5_000, np.random.default_rng(0), size=30, weights=np.array([1.0, 1.0]))
    assert (chosen == 1).mean() > 0.99


def test_downsampled_lexicase_uses_a_subset_of_the_cases():
    scores = np.eye(8)  # row i is best only on case i
    chosen = select("downsampled-lexicase", scores, 500, np.random.default_rng(3), size=2)
    assert len(set(chosen.tolist())) == 2  # one subset of 2 cases per call


@settings(max_examples=50, deadline=None)
@given(any_matrix)
def test_signatures_group_identical_rows(scores):
    pop = Population(scores)
    assert np.array_equal(pop.unique[pop.inverse], scores)
    assert len(np.unique(scores, axis=0)) == pop.u and pop.counts.sum() == len(scores)
    assert np.array_equal(pop.inverse[pop.order], np.repeat(np.arange(pop.u), pop.counts))  # grouped
    assert np.array_equal(pop.order, np.lexsort((np.arange(len(scores)), pop.inverse)))  # stable inside
    assert np.array_equal(pop.starts, np.cumsum(pop.counts) - pop.counts)


def test_user_errors_are_one_line():
    scores = np.zeros((3, 2))
    with pytest.raises(UserError, match="unknown selection"):
        select("roulette", scores, 1, np.random.default_rng(0))
    with pytest.raises(UserError, match="no option"):
        select("lexicase", scores, 1, np.random.default_rng(0), sigma=2)
    with pytest.raises(UserError, match="variant"):
        select("epsilon-lexicase", scores, 1, np.random.default_rng(0), variant="wild")
    assert len(select("uniform", scores, 0, np.random.default_rng(0))) == 0


def test_signature_hash_collisions_fall_back_to_an_exact_grouping(monkeypatch):
    import evo.selection.population as population

    scores = (np.random.default_rng(0).random((300, 5)) < 0.5).astype(float)
    monkeypatch.setattr(population, "_mix64", lambda x: np.zeros_like(x))  # every row collides
    pop = Population(scores)
    assert pop.u == len(np.unique(scores, axis=0)) and np.array_equal(pop.unique[pop.inverse], scores)
    assert np.array_equal(pop.inverse[pop.order], np.repeat(np.arange(pop.u), pop.counts))
