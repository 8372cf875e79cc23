"""VPO against the front: a hand-computed case, brute force, and the reduction to plain VPO."""

from __future__ import annotations

import numpy as np
import pytest

from training import advantages
from training.advantages import compute

RNG = np.random.default_rng


def brute_zscore(values: list[float]) -> list[float]:
    mean = sum(values) / len(values)
    std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    return [0.0 if std < 1e-6 else (v - mean) / (std + 1e-6) for v in values]


def test_hand_computed_gain_over_the_front():
    # Weightings (1, 0) and (0, 1); front {(0.5, 0.5)} plus one NaN padding row.
    # Rollout a = (0.8, 0.1): max(0.8, 0.5) - 0.5 = 0.3 and max(0.1, 0.5) - 0.5 = 0 -> 0.15.
    # Rollout b = (0.2, 0.2) improves on nothing -> 0. Rollout c = {(0.6, 0), (0, 0.9)}: 0.1, 0.4 -> 0.25.
    w = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    front = np.array([[[0.5, 0.5], [np.nan, np.nan]]])
    rewards = np.array([[[[0.8, 0.1], [0.0, 0.0]], [[0.2, 0.2], [0.0, 0.0]], [[0.6, 0.0], [0.0, 0.9]]]])
    np.testing.assert_allclose(advantages.front_gain(rewards, front, w), [[0.15, 0.0, 0.25]])
    np.testing.assert_allclose(advantages.front_values(front, w), [[0.5, 0.5]])


def test_estimator_z_scores_the_gain_under_the_groups_weightings():
    rewards = np.array([[[[0.8, 0.1]], [[0.2, 0.2]]]])
    front = np.array([[[0.5, 0.5]]])
    a = compute("vpo_front", rewards, weights=np.ones(2), rng=RNG(3), front=front, K=50)
    w = RNG(3).dirichlet(np.ones(2), size=(1, 50))[0]
    raw = [float(np.mean([max(wk @ r, wk @ front[0, 0]) - wk @ front[0, 0] for wk in w])) for r in rewards[0, :, 0]]
    np.testing.assert_allclose(a[0], brute_zscore(raw))
    assert a[0, 0] > 0 > a[0, 1]


@pytest.mark.parametrize("seed", range(6))
def test_matches_brute_force_on_random_arrays(seed):
    rng = RNG(seed)
    b, g, m, d, p, k = 3, 5, int(rng.integers(1, 4)), int(rng.integers(1, 5)), 4, 16
    rewards = rng.random((b, g, m, d))
    sizes = rng.integers(0, p + 1, size=b)  # some groups have an empty front
    front = np.full((b, p, d), np.nan)
    for i, size in enumerate(sizes):
        front[i, :size] = rng.random((size, d)) * 1.2
    a = compute("vpo_front", rewards, weights=np.ones(d), rng=RNG(100 + seed), front=front, K=k)
    w = RNG(100 + seed).dirichlet(np.ones(d), size=(b, k))
    for i in range(b):
        rows = front[i, : sizes[i]]
        raw = []
        for j in range(g):
            values = []
            for wk in w[i]:
                mine = max(float(wk @ r) for r in rewards[i, j])
                if len(rows):
                    best = max(float(wk @ f) for f in rows)
                    values.append(max(mine, best) - best)
                else:
                    values.append(mine)
            raw.append(float(np.mean(values)))
        np.testing.assert_allclose(a[i], brute_zscore(raw), atol=1e-9)


@pytest.mark.parametrize("sobol", [False, True])
def test_an_empty_front_is_plain_vpo(sobol):
    rewards = RNG(1).random((4, 6, 3, 3))
    plain = compute("vpo", rewards, weights=np.ones(3), rng=RNG(9), K=30, sobol=sobol)
    for empty in (None, np.full((4, 0, 3), np.nan), np.full((4, 5, 3), np.nan)):
        got = compute("vpo_front", rewards, weights=np.ones(3), rng=RNG(9), K=30, sobol=sobol, front=empty)
        np.testing.assert_array_equal(got, plain)


def test_an_front_that_dominates_every_rollout_gives_no_advantage():
    rewards = RNG(2).random((2, 4, 1, 3))
    a = compute("vpo_front", rewards, weights=np.ones(3), rng=RNG(0), front=np.ones((2, 1, 3)))
    assert np.array_equal(a, np.zeros((2, 4)))


def test_registry_entry_and_bad_fronts():
    entry = advantages.entry("vpo_front")
    assert entry.front and entry.prompt == "single" and not entry.multi_answer
    assert not any(e.front for name, e in advantages.REGISTRY.items() if name != "vpo_front")
    with pytest.raises(ValueError, match="front must have shape"):
        compute("vpo_front", np.zeros((2, 3, 1, 2)), weights=np.ones(2), rng=RNG(0), front=np.zeros((1, 1, 2)))
    padded = advantages.pad_fronts([np.ones((2, 2)), np.zeros((0, 2))], 2)
    assert padded.shape == (2, 2, 2) and np.isnan(padded[1]).all() and (padded[0] == 1).all()


def test_the_earlier_name_points_to_the_new_one_and_stored_runs_read_with_it(tmp_path):
    import json

    from training.config import CONFIG_FILE, TrainConfig

    with pytest.raises(advantages.UnknownEstimator, match="'vpo_archive' is called 'vpo_front' now"):
        advantages.entry("vpo_archive")
    config = TrainConfig(task="maze", algo="vpo_front", init="x", out=str(tmp_path))
    config.save(tmp_path)
    stored = json.loads((tmp_path / CONFIG_FILE).read_text())
    (tmp_path / CONFIG_FILE).write_text(json.dumps({**stored, "algo": "vpo_archive"}))
    assert TrainConfig.load(tmp_path).algo == "vpo_front"
