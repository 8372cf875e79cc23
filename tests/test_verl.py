"""veRL: the project's estimators registered with `register_adv_est`, and the set-score reward.
Runs where veRL is installed (`pip install verl`; not part of CI's environment)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from training import advantages
from training.integrations.trl import group_weightings

verl = pytest.importorskip("verl")


def test_registered_estimator_is_the_projects_group_zscore():
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    from training.integrations.verl import register

    assert register() == ["evo_grpo", "evo_multi_rlvr", "evo_random_weight_grpo", "evo_vpo"]
    rng = np.random.default_rng(0)
    rewards = rng.random((3, 4, 3, 2))  # 3 groups of 4 rollouts, 3 answers, 2 objectives
    weights = np.array([1.0, 1.0])
    scores = np.stack([advantages.vpo_scores(rewards[g:g + 1], group_weightings("vpo", 2, 0, 0, g, {"K": 16})[None])[0]
                       for g in range(3)]).reshape(-1)
    mask = torch.ones(12, 5)
    token_rewards = torch.zeros(12, 5, dtype=torch.float64)
    token_rewards[:, -1] = torch.tensor(scores)  # outcome reward on the last token, as veRL places it
    index = np.repeat(np.array(["a", "b", "c"], dtype=object), 4)
    adv, returns = get_adv_estimator_fn("evo_vpo")(token_level_rewards=token_rewards, response_mask=mask, index=index)
    ours = np.concatenate([advantages.compute("vpo", rewards[g:g + 1], weights=weights, rng=np.random.default_rng([0, 0, g]), K=16)[0]
                           for g in range(3)])
    assert np.allclose(adv[:, 0].numpy(), ours) and torch.equal(adv, returns)
    assert torch.equal(adv[:, 1:], adv[:, :1].expand(-1, 4))


def test_compute_score_parses_strictly_with_group_shared_weightings():
    from training.integrations.verl import compute_score, rows

    import tasks
    from tasks.completions import score_completion
    from training.integrations.trl import set_score

    task = tasks.get("maze")
    data = rows("maze", "vpo", count=3, seed=2, options={"K": 16})
    instances = task.instances("train", 3, seed=2)
    assert [r["prompt"][0]["content"] for r in data] == [task.prompt(i, 3) for i in instances]
    assert compute_score("evo/maze", "not a route", "", data[0]["extra_info"]) == 0.0
    for row, instance in zip(data, instances):
        answer = task.demonstrations(instance, 3, np.random.default_rng(0))
        w = group_weightings("vpo", len(task.objectives), 2, 0, row["extra_info"]["index"], {"K": 16})
        expected = set_score("vpo", score_completion(task, instance, answer, True, 3)[0], np.asarray(task.weights, float), w)
        assert compute_score("evo/maze", answer, "", row["extra_info"]) == pytest.approx(expected) and expected > 0
