"""evo.metrics against brute force: enumerate subsets, pairs and grid cells."""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from evo import metrics

small_vectors = st.integers(1, 3).flatmap(
    lambda d: arrays(np.float64, st.tuples(st.integers(1, 7), st.just(d)), elements=st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]))
)


@given(st.integers(1, 9), st.data())
@settings(max_examples=80, deadline=None)
def test_pass_at_k_matches_subset_enumeration(n, data):
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    correct = [i < c for i in range(n)]
    subsets = list(itertools.combinations(range(n), k))
    expected = sum(any(correct[i] for i in s) for s in subsets) / len(subsets)
    assert metrics.pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_is_stable_for_large_n():
    assert metrics.pass_at_k(10_000, 1, 1) == pytest.approx(1e-4)
    assert metrics.pass_at_k(10_000, 5_000, 100) == pytest.approx(1 - comb(5000, 100) / comb(10_000, 100))
    with pytest.raises(ValueError):
        metrics.pass_at_k(3, 4, 1)


@given(arrays(np.float64, st.integers(1, 8), elements=st.floats(-1, 1)), st.data())
@settings(max_examples=80, deadline=None)
def test_best_at_k_matches_subset_enumeration(rewards, data):
    k = data.draw(st.integers(1, len(rewards)))
    subsets = list(itertools.combinations(rewards, k))
    assert metrics.best_at_k(rewards, k) == pytest.approx(np.mean([max(s) for s in subsets]), abs=1e-12)


def test_best_at_k_batches_over_leading_axes_and_handles_large_n():
    rewards = np.random.default_rng(0).random((4, 30))
    batched = metrics.best_at_k(rewards, 5)
    assert batched.shape == (4,)
    assert batched[2] == pytest.approx(metrics.best_at_k(rewards[2], 5))
    assert metrics.best_at_k(rewards[0], 30) == pytest.approx(rewards[0].max())
    assert metrics.best_at_k(rewards[0], 1) == pytest.approx(rewards[0].mean())
    assert np.isfinite(metrics.best_at_k(np.random.default_rng(1).random(5000), 1000))


@given(small_vectors)
@settings(max_examples=60, deadline=None)
def test_diversity_and_pareto_match_loops(vectors):
    n = len(vectors)
    pairs = list(itertools.combinations(range(n), 2))
    expected = np.mean([np.abs(vectors[i] - vectors[j]).sum() for i, j in pairs]) if pairs else 0.0
    assert metrics.diversity(vectors) == pytest.approx(expected)
    dominated = [any((vectors[j] >= vectors[i]).all() and (vectors[j] > vectors[i]).any() for j in range(n)) for i in range(n)]
    assert list(metrics.pareto_mask(vectors)) == [not x for x in dominated]
    assert metrics.pareto_fraction(vectors) == pytest.approx(1 - np.mean(dominated))


@given(small_vectors)
@settings(max_examples=60, deadline=None)
def test_on_front_marks_every_copy_of_a_front_vector(vectors):
    """`on_front` (Database.front, the report): a row is on the front iff it equals a row of
    `front`, which is iff no row dominates it; a minimized 0 (stored as -0.0) is a 0."""
    rows = metrics.front(vectors)
    expected = [any((row == v).all() for row in rows) for v in vectors]
    assert list(metrics.on_front(vectors)) == expected == list(metrics.pareto_mask(vectors))
    signed = np.copysign(vectors, np.where(np.arange(vectors.size).reshape(vectors.shape) % 2, -1.0, 1.0))
    zeros = np.where(vectors == 0, signed, vectors)  # some zeros become -0.0: the same vectors
    assert list(metrics.on_front(zeros)) == expected


def test_spread_is_the_per_objective_std():
    v = np.array([[0.0, 1.0], [1.0, 1.0]])
    np.testing.assert_allclose(metrics.spread(v), [0.5, 0.0])


def brute_hypervolume(points: np.ndarray, reference: np.ndarray) -> float:
    grids = [np.unique(np.append(points[:, j], reference[j])) for j in range(points.shape[1])]
    volume = 0.0
    for cell in itertools.product(*[range(len(g) - 1) for g in grids]):
        low = np.array([g[i] for g, i in zip(grids, cell)])
        high = np.array([g[i + 1] for g, i in zip(grids, cell)])
        if (low >= reference).all() and (points >= high).all(axis=1).any():
            volume += float(np.prod(high - low))
    return volume


@given(st.integers(2, 4).flatmap(lambda d: arrays(np.float64, st.tuples(st.integers(1, 6), st.just(d)), elements=st.floats(0, 1))))
@settings(max_examples=60, deadline=None)
def test_hypervolume_matches_grid_enumeration(points):
    reference = np.full(points.shape[1], 0.1)
    assert metrics.hypervolume(points, reference) == pytest.approx(brute_hypervolume(points, reference), abs=1e-12)


def test_hypervolume_known_values_and_errors():
    assert metrics.hypervolume(np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]), np.zeros(2)) == pytest.approx(0.25)
    assert metrics.hypervolume(np.array([[1.0, 1.0, 1.0]]), np.zeros(3)) == pytest.approx(1.0)
    assert metrics.hypervolume(np.array([[1.0, 0.5], [0.5, 1.0]]), np.zeros(2)) == pytest.approx(0.75)
    with pytest.raises(ValueError):
        metrics.hypervolume(np.ones((2, 5)), np.zeros(5))


@given(st.integers(2, 4).flatmap(lambda d: arrays(np.float64, st.tuples(st.integers(1, 6), st.just(d)), elements=st.floats(0, 1))))
@settings(max_examples=30, deadline=None)
def test_hypervolume_estimate_agrees_with_the_exact_sweep(points):
    reference = np.full(points.shape[1], -0.1)
    exact = metrics.hypervolume(points, reference)
    assert metrics.hypervolume_estimate(points, reference, samples=40_000) == pytest.approx(exact, rel=0.03, abs=1e-3)


def test_hypervolume_estimate_in_eight_objectives():
    reference = np.full(8, -0.1)
    assert metrics.hypervolume_estimate(np.ones((1, 8)), reference) == pytest.approx(1.1 ** 8)  # one point: its box
    two = np.array([[1.0] * 4 + [0.5] * 4, [0.5] * 4 + [1.0] * 4])  # boxes overlapping in [-0.1, 0.5]^8
    expected = 2 * 1.1 ** 4 * 0.6 ** 4 - 0.6 ** 8
    assert metrics.hypervolume_estimate(two, reference) == pytest.approx(expected, rel=0.02)
    assert metrics.hypervolume_estimate(two, reference, seed=3) == metrics.hypervolume_estimate(two, reference, seed=3)
    assert metrics.hypervolume_estimate(np.full((2, 8), -0.5), reference) == 0.0
    with pytest.raises(ValueError):
        metrics.hypervolume_estimate(np.ones((2, 5)), np.zeros(4))


def test_bootstrap_interval_covers_the_mean_and_shrinks_with_n():
    rng = np.random.default_rng(0)
    small = metrics.bootstrap_ci(rng.normal(1.0, 1.0, 30), resamples=2000)
    large = metrics.bootstrap_ci(rng.normal(1.0, 1.0, 3000), resamples=2000)
    assert small.low < small.estimate < small.high
    assert large.low < 1.0 < large.high
    assert (large.high - large.low) < (small.high - small.low) / 5
    constant = metrics.bootstrap_ci(np.full(10, 0.3))
    assert constant.low == constant.high == pytest.approx(0.3)


def test_paired_test_detects_a_consistent_improvement_and_not_noise():
    rng = np.random.default_rng(1)
    base = rng.random(200)
    better = metrics.paired_test(base + 0.05 + rng.normal(0, 0.01, 200), base, resamples=2000)
    assert better.low > 0 and better.p_value < 1e-6
    same = metrics.paired_test(base, base)
    assert same.mean_difference == 0 and same.p_value == 1.0
    noise = metrics.paired_test(base + rng.normal(0, 0.05, 200), base, resamples=2000)
    assert noise.low < 0 < noise.high
    with pytest.raises(ValueError):
        metrics.paired_test(base, base[:3])


def test_front_coverage_is_one_on_the_front_and_falls_with_each_missing_trade_off():
    front = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 1.0]])
    weights = np.random.default_rng(0).dirichlet(np.ones(3), size=500)
    assert metrics.front_coverage(front, front, weights) == pytest.approx(1.0)
    assert metrics.front_coverage(np.vstack([front, [[0.5, 0.5, 0.5]]]), front, weights) == pytest.approx(1.0)
    one_side = metrics.front_coverage(front[:1], front, weights)
    brute = np.mean([(front[0] @ w) / (front @ w).max() for w in weights])
    assert one_side == pytest.approx(brute) and 0.5 < one_side < 1.0
    assert metrics.front_coverage(np.zeros((4, 3)), front, weights) == 0.0
    assert np.isnan(metrics.front_coverage(front, np.zeros((0, 3)), weights))


def test_front_width_counts_distinct_non_dominated_valid_vectors():
    pool = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [0.5, 0.5], [0.4, 0.4], [0.0, 0.0]])
    assert metrics.front_width(pool) == 3  # the copy counts once, the zero row (invalid) never
    assert metrics.front_width(np.vstack([pool, [1.0, 1.0]])) == 1  # the oracle dominates all
    assert metrics.front_width(np.zeros((4, 2))) == 0
    assert metrics.front_width(np.array([[0.1 + 0.2, 0.5], [0.3, 0.5]])) == 1  # equal but for the last bits
    rng = np.random.default_rng(0)
    for _ in range(20):  # brute force
        vectors = rng.integers(0, 3, size=(12, 3)).astype(float)
        valid = {tuple(v) for v in vectors if v.any()}
        expected = sum(not any(all(o >= v) and any(o > v) for o in map(np.array, valid)) for v in map(np.array, valid))
        assert metrics.front_width(vectors) == expected
