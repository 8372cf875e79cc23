"""`evo run --train` with a policy that answers with a set of programs per reply: a
completion's m journaled programs are one set, scored together by a set estimator."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import tasks
from evo.database import Database
from evo.errors import UserError
from evo.policies import resolve_checkpoint
from training import search_signal
from training.online import OnlineSettings, set_rewards

V, F, D = search_signal.VALID, search_signal.FAILED, search_signal.DUPLICATE


def test_a_completions_programs_are_its_set_in_slot_order():
    # one prompt, two completions of three programs: slots 0-2 are completion 0's, 3-5 completion 1's
    kinds = np.array([[V, F, V, D, F, F]])
    scores = np.full((1, 6, 2), np.nan)
    scores[0, 0], scores[0, 2], scores[0, 3] = [0.2, 0.8], [0.6, 0.1], [0.2, 0.8]  # slot 3 repeats slot 0
    proposals = search_signal.Proposals(kinds, scores, np.full((1, 0, 2), np.nan))
    rewards = set_rewards(proposals, 2)
    assert rewards.shape == (1, 2, 3, 2)
    flat = search_signal.rewards(proposals)[:, :, 0]
    assert np.array_equal(rewards.reshape(1, 6, 2), flat)  # the rule per program, only regrouped
    assert np.array_equal(rewards[0, 0, 0], [0.2, 0.8]) and np.array_equal(rewards[0, 0, 2], [0.6, 0.1])
    assert (rewards[0, 1] < rewards[0, 0, 0]).all()  # a duplicate and two failures: below every valid program


@pytest.mark.parametrize("algo, m, by, per_completion", [("vpo_front", 3, "completion", 3), ("vpo", 3, "completion", 3),
                                                         ("vpo_front", 1, "completion", 1), ("grpo", 1, "completion", 1),
                                                         ("grpo", 3, "samples", 1), ("vpo_front", 3, "samples", 1)])
def test_the_programs_per_completion_an_estimator_learns_from(algo, m, by, per_completion):
    from evo.loop import asked

    assert asked(m, 4, by)[0] == per_completion
    assert OnlineSettings.of(algo, 4, {}).check_answers(per_completion) == per_completion


def test_an_estimator_refuses_a_reply_shape_it_cannot_learn_from():
    with pytest.raises(UserError, match="one program per reply"):
        OnlineSettings.of("grpo", 4, {}).check_answers(3)
    with pytest.raises(UserError, match="scores a set"):
        OnlineSettings.of("vpo", 4, {}).check_answers(1)
    with pytest.raises(UserError, match="scores a set"):
        OnlineSettings.of("vpo", 4, {}).check_answers(1)  # 3 answers by samples: one program a completion


@pytest.mark.slow
def test_a_set_answering_policy_trains_on_its_sets(tmp_path):
    task = tasks.get("maze-clusters")
    spec = task.problem_spec(task.instances("test", 1)[0], tmp_path / "problem")
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "evo", "run", str(spec), "--policy", "local:maze-clusters-vpo",
                           "--train", "vpo_front", "--train-every", "1", "--train-option", "lr=1e-3",
                           "--iterations", "4", "--batch", "1", "--depth", "1", "--seed", "2", "--quiet", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with Database.open(out, read_only=True) as db:
        slots = {}
        for c in db.journal.candidates(since=0):
            slots.setdefault(c.iteration, []).append((c.slot, c.answer))
    samples = 4  # the maze spec's completions per prompt
    assert all(sorted(s) == [(j * 3 + k, k) for j in range(samples) for k in range(3)] for s in slots.values())
    metrics = [json.loads(line) for line in (out / "online" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]  # before iterations 2 and 3 (lag 1), each on one committed group
    assert all(np.isfinite(m["loss"]) for m in metrics)
    from transformers import AutoModelForCausalLM

    initial = AutoModelForCausalLM.from_pretrained(resolve_checkpoint("maze-clusters-vpo")).state_dict()
    trained = torch.load(out / "online" / "state.pt", weights_only=False)["model"]
    assert any(not torch.allclose(initial[k].float(), trained[k].float()) for k in trained)
