"""Advantage estimators against brute-force references and the paper's behaviours."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from training import advantages
from training.advantages import REGISTRY, compute

RNG = np.random.default_rng


def rewards_of(b: int, g: int, m: int, d: int, seed: int = 0) -> np.ndarray:
    return RNG(seed).random((b, g, m, d))


def brute_zscore(values: list[float]) -> list[float]:
    mean = sum(values) / len(values)
    std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    return [0.0 if std < 1e-6 else (v - mean) / (std + 1e-6) for v in values]


def brute_pkpo(s: list[float], k: int) -> list[float]:
    n = len(s)
    effective = []
    for i in range(n):
        subsets = [c for c in itertools.combinations(range(n), k) if i in c]
        own = sum(max(s[j] for j in c) for c in subsets) / len(subsets)
        base = sum(max(s[j] for j in c if j != i) for c in subsets) / len(subsets)
        effective.append(own - base)
    return brute_zscore(effective)


def test_registry_has_every_method_of_the_paper():
    assert set(REGISTRY) >= {"grpo", "dr_grpo", "rloo", "gdpo", "maxk", "multi_rlvr", "random_weight_grpo", "maxrl", "vpo"}


def goals_for(name: str, b: int, d: int) -> dict:
    """The `goals` a goal-conditioned estimator takes (the weights its prompts showed)."""
    return {"goals": RNG(5).dirichlet(np.ones(d), size=b)} if REGISTRY[name].goal_conditioned else {}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_shape_and_determinism(name):
    m = 3 if REGISTRY[name].multi_answer else 1
    r = rewards_of(4, 6, m, 3)
    a = compute(name, r, weights=np.ones(3), rng=RNG(1), **goals_for(name, 4, 3))
    assert a.shape == (4, 6) and np.isfinite(a).all()
    assert np.array_equal(a, compute(name, r, weights=np.ones(3), rng=RNG(1), **goals_for(name, 4, 3)))


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_identical_rollouts_get_zero_advantage(name):
    m = 3 if REGISTRY[name].multi_answer else 1
    one = RNG(2).random((1, 1, m, 4))
    r = np.repeat(one, 5, axis=1)
    if name == "gdpo":
        r = np.concatenate([r, rewards_of(1, 5, m, 4, seed=9)], axis=0)  # batch whitening needs spread
    a = compute(name, r, weights=np.ones(4), rng=RNG(0), **goals_for(name, len(r), 4))
    np.testing.assert_allclose(a[0], 0.0, atol=1e-9)


def test_grpo_matches_brute_force():
    r = rewards_of(3, 5, 1, 2)
    w = np.array([1.0, 3.0])
    a = compute("grpo", r, weights=w, rng=RNG(0))
    for b in range(3):
        s = [float(r[b, g, 0] @ w / 4) for g in range(5)]
        np.testing.assert_allclose(a[b], brute_zscore(s))


def test_rloo_is_leave_one_out_and_dr_grpo_is_centred():
    r = rewards_of(2, 4, 1, 1)
    s = r[:, :, 0, 0]
    rloo = compute("rloo", r, weights=np.ones(1), rng=RNG(0))
    for b, g in itertools.product(range(2), range(4)):
        others = [s[b, j] for j in range(4) if j != g]
        assert rloo[b, g] == pytest.approx(s[b, g] - sum(others) / 3)
    np.testing.assert_allclose(compute("dr_grpo", r, weights=np.ones(1), rng=RNG(0)), s - s.mean(1, keepdims=True))


def test_maxrl_divides_by_the_group_mean():
    r = np.array([0.0, 0.2, 0.4, 0.2]).reshape(1, 4, 1, 1)
    np.testing.assert_allclose(compute("maxrl", r, weights=np.ones(1), rng=RNG(0))[0], [-1, 0, 1, 0], atol=1e-4)


def test_gdpo_brute_force():
    r = rewards_of(2, 4, 1, 3)
    w = np.array([1.0, 2.0, 1.0])
    per = np.zeros((2, 4))
    for b, j in itertools.product(range(2), range(3)):
        per[b] += w[j] * np.array(brute_zscore(list(r[b, :, 0, j])))
    expected = (per - per.mean()) / (per.std() + 1e-6)
    np.testing.assert_allclose(compute("gdpo", r, weights=w, rng=RNG(0)), expected)


@given(
    arrays(np.float64, st.integers(2, 7), elements=st.sampled_from([0.0, 0.25, 0.5, 1.0]) | st.floats(0, 1)),
    st.data(),
)
@settings(max_examples=60, deadline=None)
def test_maxk_matches_enumeration_of_k_subsets(s, data):
    k = data.draw(st.integers(2, len(s)))
    r = s.reshape(1, -1, 1, 1)
    a = compute("maxk", r, weights=np.ones(1), rng=RNG(0), k=k)
    np.testing.assert_allclose(a[0], brute_pkpo(list(s), k), atol=1e-9)


def test_maxk_default_k_and_credit_goes_to_the_best():
    r = np.array([0.1, 0.9, 0.1, 0.1, 0.2, 0.1, 0.1, 0.1]).reshape(1, 8, 1, 1)
    a = compute("maxk", r, weights=np.ones(1), rng=RNG(0))
    np.testing.assert_allclose(a[0], brute_pkpo(list(r.ravel()), 4), atol=1e-9)
    assert a[0].argmax() == 1
    with pytest.raises(ValueError):
        compute("maxk", r, weights=np.ones(1), rng=RNG(0), k=1)


def test_multi_rlvr_scores_the_sum_over_the_set():
    r = rewards_of(2, 5, 3, 2)
    a = compute("multi_rlvr", r, weights=np.ones(2), rng=RNG(0))
    for b in range(2):
        np.testing.assert_allclose(a[b], brute_zscore([float(r[b, g].mean(axis=1).sum()) for g in range(5)]))


def test_random_weight_grpo_uses_one_dirichlet_weight_per_group():
    r = rewards_of(3, 6, 1, 2)
    a = compute("random_weight_grpo", r, weights=np.ones(2), rng=RNG(5))
    w = RNG(5).dirichlet(np.ones(2), size=3)
    for b in range(3):
        np.testing.assert_allclose(a[b], brute_zscore([float(r[b, g, 0] @ w[b]) for g in range(6)]))


def test_goal_grpo_scores_each_group_under_the_weight_its_prompt_showed():
    # Two groups of two answers, one specialist per objective; group 0 was asked for 3:1,
    # group 1 for 1:3. Scores 0.75 vs 0.25 -> mean 0.5, std 0.25 -> z = +-0.25 / (0.25 + 1e-6).
    r = np.array([[[[1.0, 0.0]], [[0.0, 1.0]]], [[[1.0, 0.0]], [[0.0, 1.0]]]])
    goals = np.array([[0.75, 0.25], [0.25, 0.75]])
    a = compute("goal_grpo", r, weights=np.array([0.0, 1.0]), rng=RNG(0), goals=goals)  # task weights unused
    z = 0.25 / (0.25 + 1e-6)
    np.testing.assert_allclose(a, [[z, -z], [-z, z]])
    with pytest.raises(ValueError, match="goals"):
        compute("goal_grpo", r, weights=np.ones(2), rng=RNG(0), goals=goals[:1])


def test_registry_entries_say_which_prompt_they_train_on():
    prompts = {name: entry.prompt for name, entry in REGISTRY.items()}
    assert {n for n, p in prompts.items() if p == "set"} == {"vpo", "multi_rlvr"}
    assert {n for n, p in prompts.items() if p == "goal"} == {"goal_grpo"}
    assert REGISTRY["vpo"].multi_answer and not REGISTRY["grpo"].multi_answer and REGISTRY["goal_grpo"].goal_conditioned
    with pytest.raises(ValueError, match="prompt"):
        advantages.Entry(advantages.grpo, prompt="pair")


def test_vpo_matches_brute_force_with_the_same_weightings():
    r = rewards_of(2, 4, 3, 3)
    a = compute("vpo", r, weights=np.ones(3), rng=RNG(7), K=20)
    w = RNG(7).dirichlet(np.ones(3), size=(2, 20))
    for b in range(2):
        raw = [float(np.mean([max(w[b, k] @ r[b, g, i] for i in range(3)) for k in range(20)])) for g in range(4)]
        np.testing.assert_allclose(a[b], brute_zscore(raw))


def test_vpo_with_one_answer_and_huge_alpha_is_grpo_on_the_mean():
    r = rewards_of(3, 8, 1, 4)
    vpo = compute("vpo", r, weights=np.ones(4), rng=RNG(0), alpha=1e7)
    grpo = compute("grpo", r, weights=np.ones(4), rng=RNG(0))
    np.testing.assert_allclose(vpo, grpo, atol=1e-2)


@pytest.mark.parametrize("sobol", [False, True])
def test_vpo_prefers_a_set_covering_two_objectives_to_two_specialist_copies(sobol):
    a_spec = [1.0, 0.0]
    b_spec = [0.0, 1.0]
    covering = [a_spec, b_spec, [0.0, 0.0]]
    copies = [a_spec, a_spec, [0.0, 0.0]]
    r = np.array([[covering, copies]])
    a = compute("vpo", r, weights=np.ones(2), rng=RNG(0), sobol=sobol)
    assert a[0, 0] > 0 > a[0, 1]
    assert compute("multi_rlvr", r, weights=np.ones(2), rng=RNG(0))[0, 0] == 0.0  # no incentive to diversify


@pytest.mark.parametrize("alpha", [1.0, 0.5, 3.0])
def test_sobol_weightings_lie_on_the_simplex_and_have_the_dirichlet_mean(alpha):
    w = advantages.dirichlet_weights(RNG(0), 5, 128, 3, alpha, sobol=True)
    assert w.shape == (5, 128, 3) and (w >= 0).all()
    np.testing.assert_allclose(w.sum(-1), 1.0)
    np.testing.assert_allclose(w.mean(axis=(0, 1)), 1 / 3, atol=0.02)


def test_sobol_lowers_the_noise_of_vpo_scores():
    r = rewards_of(1, 8, 3, 4, seed=3)
    truth = advantages.vpo_scores(r, advantages.dirichlet_weights(RNG(0), 1, 200_000, 4, 1.0, False))
    errors = {}
    for sobol in (False, True):
        draws = [advantages.vpo_scores(r, advantages.dirichlet_weights(RNG(s), 1, 100, 4, 1.0, sobol)) for s in range(40)]
        errors[sobol] = float(np.mean([(d - truth) ** 2 for d in draws]))
    assert errors[True] < errors[False] / 2


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="registered"):
        compute("nope", rewards_of(1, 2, 1, 1), weights=np.ones(1), rng=RNG(0))
    with pytest.raises(ValueError, match="single-answer"):
        compute("grpo", rewards_of(1, 2, 3, 1), weights=np.ones(1), rng=RNG(0))
    with pytest.raises(ValueError, match="shape"):
        compute("vpo", np.zeros((2, 3, 1)), weights=np.ones(1), rng=RNG(0))
