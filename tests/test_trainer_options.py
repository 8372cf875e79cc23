"""The trainer's options (entropy bonus, clip-higher, diversity reward, goal-conditioned GRPO)
through `training.trainer.run` on a real tiny model: short smoke runs, and all options off
taking the code path of before they existed."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from evo.errors import UserError
from tests.test_trainer import config, init_dir, strip_time  # noqa: F401 (init_dir is a fixture)
from tests.toytask import CharMix, GoalCharMix
from training import advantages, trainer
from training.rollouts import collect
from training.trainer import run

torch.set_num_threads(1)


def rollout_before_the_options(state):
    """`training/trainer.py:rollout` as it was before the options: the task's plain prompts,
    the estimator on the scored rewards."""
    cfg = state.config
    instance_seed, sample_seed, rng = trainer.seeds(cfg, state.step)
    instances = state.task.instances("train", cfg.prompts, seed=instance_seed)
    rolls = collect(state.model, state.tokenizer, state.task, instances, m=cfg.set_size,
                    group=cfg.group, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                    top_p=cfg.top_p, seed=sample_seed)
    return rolls, advantages.compute(cfg.algo, rolls.rewards, weights=state.task.weights, rng=rng, **cfg.options)


@pytest.mark.parametrize("algo", ["grpo", "vpo"])
def test_all_options_off_give_the_metrics_of_the_code_before_them(init_dir, tmp_path, monkeypatch, algo):
    now = run(config(init_dir, tmp_path / "now", algo=algo, steps=2), task=GoalCharMix(), progress=False)
    monkeypatch.setattr(trainer, "rollout", rollout_before_the_options)
    before = run(config(init_dir, tmp_path / "before", algo=algo, steps=2), task=GoalCharMix(), progress=False)
    assert strip_time(now) == strip_time(before)


def test_entropy_bonus_lowers_the_loss_by_coef_times_the_normalized_entropy(init_dir, tmp_path):
    plain = run(config(init_dir, tmp_path / "plain", steps=2), task=CharMix(), progress=False)
    bonus = run(config(init_dir, tmp_path / "bonus", steps=2, entropy_coef=0.5), task=CharMix(), progress=False)
    first, same = bonus[0], plain[0]
    assert first["scalar"] == same["scalar"] and "entropy" not in same  # computed only with a coefficient
    # loss = policy loss - coef * (summed entropy) / (rollouts * max_new_tokens); the entropy
    # logged is per token, so the sum over rollouts is entropy * mean length * rollouts.
    expected = same["loss"] - 0.5 * first["entropy"] * same["length"] / 12
    assert first["loss"] == pytest.approx(expected, rel=1e-4, abs=1e-6)
    assert bonus[1]["loss"] != plain[1]["loss"]


def test_clip_higher_runs_and_counts_clipped_tokens(init_dir, tmp_path):
    records = run(config(init_dir, tmp_path / "o", steps=2, ppo_epochs=2, eps_high=0.28), task=CharMix(), progress=False)
    assert all(0.0 <= r["clip_fraction"] <= 1.0 for r in records)


def test_diversity_reward_reaches_the_estimator_but_not_the_logged_rewards(init_dir, tmp_path, monkeypatch):
    seen = []
    compute = advantages.compute

    def spy(name, rewards, **kwargs):
        seen.append(rewards)
        return compute(name, rewards, **kwargs)

    monkeypatch.setattr(advantages, "compute", spy)
    plain = run(config(init_dir, tmp_path / "plain", steps=2), task=GoalCharMix(), progress=False)
    shaped = run(config(init_dir, tmp_path / "shaped", steps=2, diversity_coef=1.0), task=GoalCharMix(), progress=False)
    assert shaped[0]["scalar"] == plain[0]["scalar"]  # the metrics report the task's rewards
    ratio = seen[2] / np.where(seen[0] == 0, 1.0, seen[0])  # step 1: same samples, rescaled
    assert (ratio[seen[0] > 0] >= 1.0).all() and (ratio[seen[0] > 0] <= 2.0).all() and (ratio > 1.0).any()
    with pytest.raises(UserError, match="similarity"):
        run(config(init_dir, tmp_path / "x", diversity_coef=1.0), task=CharMix(), progress=False)
    with pytest.raises(UserError, match="single-answer"):
        run(config(init_dir, tmp_path / "y", algo="vpo", diversity_coef=1.0), task=GoalCharMix(), progress=False)


def test_goal_grpo_shows_each_group_its_weight_and_scores_with_it(init_dir, tmp_path, monkeypatch):
    prompts, goals = [], []
    sample, compute = trainer.collect, advantages.compute

    def spy_collect(*args, **kwargs):
        prompts.append(kwargs["prompts"])
        return sample(*args, **kwargs)

    def spy_compute(name, rewards, **kwargs):
        goals.append(kwargs["goals"])
        return compute(name, rewards, **kwargs)

    monkeypatch.setattr(trainer, "collect", spy_collect)
    monkeypatch.setattr(advantages, "compute", spy_compute)
    records = run(config(init_dir, tmp_path / "o", algo="goal_grpo", steps=2), task=GoalCharMix(), progress=False)
    assert len(records) == 2 and len(prompts) == len(goals) == 2
    for shown, weights in zip(prompts, goals):
        assert weights.shape == (3, 2)  # one weighting per prompt group
        assert [int(re.search(r"w(\d{3}):", p).group(1)) for p in shown] == [round(100 * w[0]) for w in weights]
    assert not np.array_equal(goals[0], goals[1])
    with pytest.raises(UserError, match="prompt_with_weights"):
        run(config(init_dir, tmp_path / "x", algo="goal_grpo"), task=CharMix(), progress=False)


class ShiftedSampler:
    """The local sampler, its sampling log-probs moved by `shift` (an engine that disagrees)."""

    sleeps, engine_bytes = False, 0  # an engine that never sleeps and holds nothing

    def __init__(self, model, tokenizer, shift: float) -> None:
        from evo.policies.sampler import Sampler

        self.sampler, self.shift = Sampler(model, tokenizer), shift

    def sleep(self, step: int) -> None:
        pass

    def sample(self, prompts, **kwargs):
        samples = self.sampler.sample(prompts, **kwargs)
        samples.logprobs.add_(self.shift * samples.completion_mask)
        return samples

    def after_update(self, step: int) -> dict:
        return {}


@pytest.mark.parametrize("shift, weight, capped", [(-np.log(4.0), 2.0, 1.0), (np.log(2.0), 0.5, 0.0)])
def test_tis_cap_weights_each_tokens_policy_gradient(init_dir, tmp_path, shift, weight, capped):
    """Sampling log-probs log 4 below the trainer's give weight min(4, 2) = 2 on every token (the
    loss, a pure policy term here, doubles); log 2 above give 1/2. Off, the sampler is ignored."""
    import dataclasses

    def first_step(name: str, cap: float) -> dict:
        state = trainer.setup(config(init_dir, tmp_path / name, steps=1), False, CharMix())
        state.config = dataclasses.replace(state.config, rollouts="vllm", tis_cap=cap)
        state.sampler = ShiftedSampler(state.model, state.tokenizer, shift)
        return trainer.train_step(state)

    plain, weighted = first_step("plain", 0.0), first_step("tis", 2.0)
    assert "tis_weight" not in plain and plain["scalar"] == weighted["scalar"]
    assert weighted["tis_weight"] == pytest.approx(weight, rel=1e-3) and weighted["tis_capped"] == capped
    assert weighted["loss"] == pytest.approx(weight * plain["loss"], rel=1e-3)
    assert plain["loss"] != 0.0


def test_tis_cap_needs_vllm_rollouts_and_a_cap_of_at_least_one(init_dir, tmp_path):
    with pytest.raises(ValueError, match="needs rollouts vllm"):
        config(init_dir, tmp_path, tis_cap=2.0)
    with pytest.raises(ValueError, match=re.escape("tis_cap must be 0 (off) or >= 1")):
        config(init_dir, tmp_path, rollouts="vllm", tis_cap=0.5)
