"""VPO for any TRL user: a reward function for `GRPOTrainer` from your own vector reward.

    reward = VPOReward(vector_reward, split_answers, K=100)
    trainer = GRPOTrainer(model=..., reward_funcs=reward, train_dataset=..., args=GRPOConfig(...))
    trainer.train()

`vector_reward(prompt, answer) -> array of d objectives` scores one answer; `split_answers(text)
-> list of answers` cuts a completion into its set of answers (an empty list scores `missing`).
A completion's score is R(S) = mean over K Dirichlet(alpha) weightings w of max over its
answers of w . r(answer); TRL's group z-score of R(S) is VPO's advantage (up to TRL's sample
std + 1e-4, see `training.integrations.trl`). The weightings are drawn from (seed, step, prompt):
every completion of a group shares them, on every rank (the prompt is hashed with sha256, not
Python's per-process `hash`), and they change from step to step.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np

from training.advantages import dirichlet_weights, vpo_scores
from training.integrations.set_reward import completion_text


def prompt_key(prompt) -> int:
    """A stable 64-bit key of a prompt (text or chat messages), the same in every process."""
    return int.from_bytes(hashlib.sha256(repr(prompt).encode()).digest()[:8], "little")


class VPOReward:
    """TRL reward function: each completion's VPO set score R(S) under its group's weightings."""

    def __init__(self, vector_reward: Callable[[object, str], Sequence[float]], split_answers: Callable[[str], list[str]],
                 *, K: int = 100, alpha: float = 1.0, sobol: bool = False, seed: int = 0, missing: float = 0.0) -> None:
        if K < 1 or alpha <= 0:
            raise ValueError(f"VPOReward needs K >= 1 and alpha > 0, got K={K}, alpha={alpha}")
        self.vector_reward, self.split_answers = vector_reward, split_answers
        self.K, self.alpha, self.sobol, self.seed, self.missing = K, alpha, sobol, seed, missing
        self.__name__ = "vpo"  # TRL logs rewards/vpo/mean

    def weightings(self, prompt, step: int, d: int) -> np.ndarray:
        """The (K, d) weightings every completion of `prompt` at `step` is scored under."""
        rng = np.random.default_rng([self.seed, step, prompt_key(prompt)])
        return dirichlet_weights(rng, 1, self.K, d, self.alpha, self.sobol)[0]

    def score(self, prompt, completion: str, step: int) -> float:
        answers = self.split_answers(completion)
        if not answers:
            return self.missing
        rewards = np.asarray([np.asarray(self.vector_reward(prompt, a), dtype=np.float64) for a in answers])
        w = self.weightings(prompt, step, rewards.shape[1])
        return float(vpo_scores(rewards[None, None], w[None])[0, 0])

    def __call__(self, prompts, completions, trainer_state=None, **_) -> list[float]:
        step = trainer_state.global_step if trainer_state is not None else 0
        return [self.score(p, completion_text(c), step) for p, c in zip(prompts, completions)]
