"""veRL: the dataset rows written to parquet with default options, read back as veRL's
RLHFDataset reads them (`datasets` parquet loader), and `compute_score` called as veRL's
reward manager calls it (keywords data_source, solution_str, ground_truth, extra_info).
veRL itself is not needed: its `adv_estimator=grpo` z-scores these scores within a group."""

from __future__ import annotations

import numpy as np
import pytest

import tasks
from tasks.completions import score_completion
from training.integrations.set_reward import group_weightings, set_score
from training.integrations import verl
from training.integrations.verl import compute_score, rows, write


@pytest.fixture(autouse=True)
def fresh_counter():
    verl._SCORED.clear()  # each test starts at step 0 of a new process
    yield
    verl._SCORED.clear()


def test_weightings_are_redrawn_each_step_and_shared_by_a_group():
    """A prompt's n rollouts of one step share one Dirichlet draw; its next group draws anew."""
    task, group = tasks.get("maze"), 4
    row = rows("maze", "random_weight_grpo", count=3, seed=2, group=group)[1]
    instance = task.instances("train", 3, seed=2)[1]
    matrix = score_completion(task, instance, task.demonstrations(instance, 1, np.random.default_rng(0)), True, 1)[0]
    assert np.ptp(matrix) > 0  # objectives differ, so different weightings give different scores
    scores = [compute_score("evo/maze", task.demonstrations(instance, 1, np.random.default_rng(0)), "", row["extra_info"])
              for _ in range(3 * group)]
    steps = [scores[i * group:(i + 1) * group] for i in range(3)]
    assert all(len(set(s)) == 1 for s in steps)  # one draw per group
    assert len({s[0] for s in steps}) == 3  # three steps, three draws
    for step, s in enumerate(steps):
        w = group_weightings("random_weight_grpo", len(task.objectives), 2, step, 1, {})
        assert s[0] == pytest.approx(set_score("random_weight_grpo", matrix, np.asarray(task.weights, float), w))


def test_loaded_through_verls_own_reward_loading():
    """veRL's get_custom_reward_fn loads compute_score from the file, as custom_reward_function.path does."""
    reward = pytest.importorskip("verl.trainer.ppo.reward")
    from pathlib import Path

    from omegaconf import OmegaConf

    path = Path(verl.__file__)
    config = OmegaConf.create({"custom_reward_function": {"path": str(path), "name": "compute_score"},
                               "reward": {"custom_reward_function": {"path": str(path), "name": "compute_score"}}})
    fn = reward.get_custom_reward_fn(config)
    row = rows("maze", "vpo", count=3, seed=2, options={"K": 8}, group=2)[0]
    assert fn(data_source="evo/maze", solution_str="not a route", ground_truth="", extra_info=row["extra_info"]) == 0.0


pytest.importorskip("pyarrow")


@pytest.mark.parametrize("algo, m, options", [("vpo", 3, {"K": 16}), ("grpo", 1, None), ("random_weight_grpo", 1, {})])
def test_parquet_rows_round_trip_and_compute_score_as_verl_calls_it(tmp_path, algo, m, options):
    from datasets import load_dataset

    task = tasks.get("maze")
    path = write(tmp_path / "train.parquet", "maze", algo, count=3, seed=2, options=options)  # None / {}: default options
    data = load_dataset("parquet", data_files=str(path))["train"]
    instances = task.instances("train", 3, seed=2)
    assert [r["prompt"][0]["content"] for r in data] == [task.prompt(i, m) for i in instances]
    row = data[0]
    assert compute_score(data_source=row["data_source"], solution_str="not a route",
                         ground_truth=row["reward_model"]["ground_truth"], extra_info=row["extra_info"]) == 0.0
    weights = np.asarray(task.weights, float)
    for row, instance in zip(data, instances):
        answer = task.demonstrations(instance, m, np.random.default_rng(0))
        w = group_weightings(algo, len(task.objectives), 2, 0, row["extra_info"]["index"], options or {})
        expected = set_score(algo, score_completion(task, instance, answer, True, m)[0], weights, w)
        got = compute_score(data_source=row["data_source"], solution_str=answer, ground_truth=row["reward_model"]["ground_truth"],
                            extra_info={**row["extra_info"], "num_turns": 2})  # veRL may add keys of its own
        assert got == pytest.approx(expected) and expected > 0


def test_rows_refuse_an_estimator_the_score_cannot_express():
    from evo.errors import UserError

    with pytest.raises(UserError, match="veRL's compute_score runs"):
        rows("maze", "maxk", count=2)


@pytest.mark.parametrize("extra_info", [None, {}, {"task": "maze"}, {"task": "maze", "count": 3, "seed": 2, "algo": "vpo",
                                                                       "m": 3, "options": "{}", "index": 7}])
def test_compute_score_without_the_rows_extra_info_says_what_it_needs(extra_info):
    with pytest.raises(ValueError, match="extra_info"):
        compute_score(data_source="evo/maze", solution_str="x", ground_truth="", extra_info=extra_info)
