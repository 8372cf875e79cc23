"""veRL: the dataset rows written to parquet with default options, read back as veRL's
RLHFDataset reads them (`datasets` parquet loader), and `compute_score` called as veRL 0.9.1's
reward loop calls it: keywords data_source, solution_str, ground_truth, extra_info (the row's,
merged with the rollout server's fields: `global_steps`, ...), each rollout on one of 8 reward
workers picked at random. veRL's `adv_estimator=grpo` z-scores these scores within a group. veRL
itself is needed only to load the file through its own reward loading; CI runs this file a second
time in the env .ci/verl-env.sh builds (veRL 0.9.1 pins transformers < 5.11)."""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
from pathlib import Path

import numpy as np
import pytest

import tasks
from tasks.completions import score_completion
from training.integrations.set_reward import group_weightings, set_score
from training.integrations import verl
from training.integrations.verl import compute_score, rows, write


def as_verl_passes(row_info: dict, global_steps: int) -> dict:
    """extra_info as veRL 0.9.1's reward-loop naive manager builds it: the row's, updated with the
    rollout server's extra fields (single-turn agent loop), then num_turns and rollout_reward_scores."""
    server = {"global_steps": global_steps, "min_global_steps": global_steps, "max_global_steps": global_steps,
              "num_cached_tokens": 0, "turn_scores": [], "tool_rewards": []}
    return {**row_info, **server, "num_turns": 2, "rollout_reward_scores": {}}


def reward_worker(i: int):
    """One reward-loop worker's compute_score: its own copy of the module, loaded from the file as
    veRL's get_custom_reward_fn loads custom_reward_function.path in each worker process."""
    spec = importlib.util.spec_from_file_location(f"reward_worker_{i}", verl.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compute_score


def test_a_group_shares_one_draw_across_random_reward_workers_and_each_step_draws_anew():
    """Replays veRL 0.9.1's placement: 3 steps of 4 prompts x n = 4 rollouts, each rollout scored by
    one of 8 reward workers picked at random (`random.choice(reward_loop_worker_handles)`)."""
    task, algo, n = tasks.get("maze"), "random_weight_grpo", 4  # K = 1: each score shows its weighting
    data = rows("maze", algo, count=4, seed=2)
    instances = task.instances("train", 4, seed=2)
    answers = [task.demonstrations(instance, 1, np.random.default_rng(0)) for instance in instances]
    matrices = [score_completion(task, instance, answer, True, 1)[0] for instance, answer in zip(instances, answers)]
    assert all(np.ptp(matrix) > 0 for matrix in matrices)  # objectives differ: different weightings, different scores
    workers, placement, weights = [reward_worker(i) for i in range(8)], random.Random(0), np.asarray(task.weights, float)
    scores = {}
    for step in range(3):
        for index in placement.sample(range(4), 4):  # the step's batch, shuffled
            for j in range(n):
                score = placement.choice(workers)
                scores[step, index, j] = score(data_source="evo/maze", solution_str=answers[index], ground_truth="",
                                               extra_info=as_verl_passes(data[index]["extra_info"], step))
    for step in range(3):
        for index in range(4):
            group = {scores[step, index, j] for j in range(n)}
            w = group_weightings(algo, len(task.objectives), 2, step, index, {})
            assert len(group) == 1 and group.pop() == pytest.approx(set_score(algo, matrices[index], weights, w))
        assert len({scores[step, index, 0] for index in range(4)}) == 4  # each prompt its own draw
    for index in range(4):
        assert len({scores[step, index, 0] for step in range(3)}) == 3  # redrawn each step


def test_a_validation_pass_changes_no_training_draw(tmp_path):
    """Rows of the test split (data.val_files) scored between two steps leave the next step's draws as they were."""
    train, test = rows("maze", "vpo", count=2, seed=2, options={"K": 8}), rows("maze", "vpo", count=2, seed=2, options={"K": 8}, split="test")
    assert [r["prompt"] for r in train] != [r["prompt"] for r in test]
    answer = tasks.get("maze").demonstrations(tasks.get("maze").instances("train", 2, seed=2)[0], 3, np.random.default_rng(0))
    before = compute_score("evo/maze", answer, "", as_verl_passes(train[0]["extra_info"], 1))
    for row in test * 3:
        compute_score("evo/maze", "not a route", "", as_verl_passes(row["extra_info"], 1))
    assert compute_score("evo/maze", answer, "", as_verl_passes(train[0]["extra_info"], 1)) == before > 0


@pytest.mark.parametrize("global_steps", [None, -1, "3", True])
def test_compute_score_without_the_servers_step_says_what_it_needs(global_steps):
    info = rows("maze", "vpo", count=2, seed=2)[0]["extra_info"]
    with pytest.raises(ValueError, match="global_steps"):
        compute_score("evo/maze", "x", "", {**info, "global_steps": global_steps})


VERL_PY = os.environ.get("VPO_EVO_VERL_PYTHON", "")  # the env .ci/verl-env.sh builds: veRL 0.9.1 and its transformers
IN_VERL = importlib.util.find_spec("verl") is not None


def test_loaded_through_verls_own_reward_loading():
    """veRL's get_custom_reward_fn loads compute_score from the file, as custom_reward_function.path
    does. veRL 0.9.1 pins transformers < 5.11, which this project's env does not have: without veRL
    here, this whole file runs again in the env .ci/verl-env.sh builds, where this test is run
    in-process, and must pass there with nothing skipped."""
    if not IN_VERL:
        if not VERL_PY:
            pytest.skip("veRL is not importable here and VPO_EVO_VERL_PYTHON is not set (see .ci/verl-env.sh)")
        done = subprocess.run([VERL_PY, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(Path(__file__).resolve())],
                              cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=900)
        summary = (done.stdout.strip().splitlines() or [""])[-1]
        assert done.returncode == 0 and "passed" in summary and "skipped" not in summary, done.stdout[-4000:] + done.stderr[-2000:]
        return
    from verl.trainer.ppo import reward

    from omegaconf import OmegaConf

    path = Path(verl.__file__)
    config = OmegaConf.create({"custom_reward_function": {"path": str(path), "name": "compute_score"},
                               "reward": {"custom_reward_function": {"path": str(path), "name": "compute_score"}}})
    fn = reward.get_custom_reward_fn(config)
    row = rows("maze", "vpo", count=3, seed=2, options={"K": 8})[0]
    assert fn(data_source="evo/maze", solution_str="not a route", ground_truth="",
              extra_info=as_verl_passes(row["extra_info"], 0)) == 0.0


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
                         ground_truth=row["reward_model"]["ground_truth"], extra_info=as_verl_passes(row["extra_info"], 0)) == 0.0
    weights = np.asarray(task.weights, float)
    for row, instance in zip(data, instances):
        answer = task.demonstrations(instance, m, np.random.default_rng(0))
        w = group_weightings(algo, len(task.objectives), 2, 0, row["extra_info"]["index"], options or {})
        expected = set_score(algo, score_completion(task, instance, answer, True, m)[0], weights, w)
        got = compute_score(data_source=row["data_source"], solution_str=answer, ground_truth=row["reward_model"]["ground_truth"],
                            extra_info=as_verl_passes(row["extra_info"], 0))
        assert got == pytest.approx(expected) and expected > 0


def test_rows_refuse_an_estimator_the_score_cannot_express():
    from evo.errors import UserError

    with pytest.raises(UserError, match="veRL's compute_score runs"):
        rows("maze", "maxk", count=2)


@pytest.mark.parametrize("extra_info", [None, {}, {"task": "maze"}, {"task": "maze", "split": "train", "count": 3, "seed": 2,
                                                                       "algo": "vpo", "m": 3, "options": "{}", "index": 7,
                                                                       "global_steps": 0}])
def test_compute_score_without_the_rows_extra_info_says_what_it_needs(extra_info):
    with pytest.raises(ValueError, match="extra_info"):
        compute_score(data_source="evo/maze", solution_str="x", ground_truth="", extra_info=extra_info)
