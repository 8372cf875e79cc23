"""The VPO plug-in for TRL users: weightings shared by a group (prompt and step), the set score
against brute force, and the README's snippet run as it is with TRL's real GRPOTrainer."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import numpy as np
import pytest

from evo.policies import CHECKPOINTS
from training.integrations.vpo_reward import VPOReward, prompt_key

ROOT = Path(__file__).resolve().parents[1]
SNIPPET = ROOT / "examples" / "trl_vpo" / "train.py"


def vector_reward(prompt, answer):
    return np.array([len(answer) % 3, answer.count("a"), float(len(prompt) > 3)])


def split_answers(text):
    return [a for a in text.split(";") if a]


def test_score_is_the_mean_over_weightings_of_the_best_answer():
    reward = VPOReward(vector_reward, split_answers, K=50, alpha=0.7, seed=3)
    w = reward.weightings("p1", 4, 3)
    assert w.shape == (50, 3) and np.allclose(w.sum(axis=1), 1)
    answers = ["ab", "aaaa", "xyzab"]
    brute = np.mean([max(wk @ vector_reward("p1", a) for a in answers) for wk in w])
    assert reward.score("p1", ";".join(answers), 4) == pytest.approx(brute)
    assert reward.score("p1", "", 4) == 0.0  # no answer: `missing`


def test_weightings_are_keyed_on_prompt_and_step_only():
    reward = VPOReward(vector_reward, split_answers, K=8)
    again = VPOReward(vector_reward, split_answers, K=8)
    assert np.array_equal(reward.weightings("p", 2, 3), again.weightings("p", 2, 3))  # same group, any caller
    assert not np.array_equal(reward.weightings("p", 2, 3), reward.weightings("p", 3, 3))
    assert not np.array_equal(reward.weightings("p", 2, 3), reward.weightings("q", 2, 3))
    chat = [{"role": "user", "content": "p"}]
    assert prompt_key(chat) == prompt_key([dict(m) for m in chat])
    assert prompt_key("p") == 0x187D81C86AB36384  # sha256, not Python's per-process hash: every rank agrees


def test_trl_calls_it_with_shared_weightings_per_group():
    from types import SimpleNamespace

    reward = VPOReward(vector_reward, split_answers, K=16)
    prompts = ["pp", "pp", "qq", "qq"]
    completions = ["a;b", "aa", [{"role": "assistant", "content": "aaa"}], ""]
    scores = reward(prompts=prompts, completions=completions, trainer_state=SimpleNamespace(global_step=7))
    assert scores == [reward.score("pp", "a;b", 7), reward.score("pp", "aa", 7), reward.score("qq", "aaa", 7), 0.0]


@pytest.mark.slow
def test_the_readme_snippet_runs_as_it_is_with_grpo_trainer(tmp_path, monkeypatch):
    pytest.importorskip("trl")
    block = re.search(r"## VPO in your own TRL script.*?```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block and block.group(1) == SNIPPET.read_text()  # the README shows the file verbatim
    monkeypatch.setenv("MODEL", str(CHECKPOINTS / "maze-warmup"))
    monkeypatch.chdir(tmp_path)
    trainer = runpy.run_path(str(SNIPPET), run_name="__main__")["trainer"]
    assert trainer.state.global_step == 2
    logged = [h for h in trainer.state.log_history if "rewards/vpo/mean" in h]
    assert logged and all(np.isfinite(h["rewards/vpo/mean"]) for h in logged)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, 1e308, 1e101])
def test_a_vector_that_is_not_finite_or_overflows_is_a_value_error_never_a_score(value):
    reward = VPOReward(lambda prompt, answer: [1.0, value], split_answers, K=8)
    with pytest.raises(ValueError, match="finite and at most 1e"):
        reward(prompts=["p"], completions=["a;b"])


@pytest.mark.parametrize("settings", [{"alpha": np.nan}, {"alpha": -1.0}, {"alpha": np.inf}, {"K": 0}, {"K": 2.5},
                                      {"sobol": "yes"}, {"missing": np.nan}, {"missing": -np.inf}])
def test_settings_that_would_give_non_finite_scores_are_refused_when_made(settings):
    with pytest.raises(ValueError, match="VPOReward"):
        VPOReward(vector_reward, split_answers, **settings)


def test_big_finite_vectors_score_finitely():
    reward = VPOReward(lambda prompt, answer: [1e100, -1e100, 1e100], split_answers, K=8)
    assert np.isfinite(reward(prompts=["p"], completions=["a;b"])).all()
