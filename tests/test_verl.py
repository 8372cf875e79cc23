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
from training.integrations.verl import compute_score, rows, write

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
