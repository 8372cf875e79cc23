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
Python's per-process `hash`), and they change from step to step. Every score is finite: K, alpha
and `missing` are checked when the reward is made, and a vector with a NaN, an infinity or a
value beyond 1e100 in magnitude (the project's score contract, evo.scores) is a ValueError
naming it, never a NaN handed to TRL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import numpy as np

from evo.scores import MAX_MAGNITUDE
from training.advantages import dirichlet_weights, option_problem, vpo_scores
from training.integrations.set_reward import completion_text


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) <= MAX_MAGNITUDE


def prompt_key(prompt) -> int:
    """A stable 64-bit key of a prompt (text or chat messages), the same in every process."""
    return int.from_bytes(hashlib.sha256(repr(prompt).encode()).digest()[:8], "little")


class VPOReward:
    """TRL reward function: each completion's VPO set score R(S) under its group's weightings."""

    def __init__(self, vector_reward: Callable[[object, str], Sequence[float]], split_answers: Callable[[str], list[str]],
                 *, K: int = 100, alpha: float = 1.0, sobol: bool = False, seed: int = 0, missing: float = 0.0) -> None:
        problem = option_problem("vpo", {"K": K, "alpha": alpha, "sobol": sobol})
        if problem:
            raise ValueError(f"VPOReward: {problem}")
        if not _finite(missing):
            raise ValueError(f"VPOReward: missing must be a finite number of magnitude <= {MAX_MAGNITUDE:g}, got {missing!r}")
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
        vectors = [np.asarray(self.vector_reward(prompt, a), dtype=np.float64) for a in answers]
        for answer, vector in zip(answers, vectors):
            if vector.ndim != 1 or vector.shape != vectors[0].shape or not vector.size:
                raise ValueError(f"vector_reward must return one vector of d objectives per answer; got shape "
                                 f"{vector.shape} for {answer[:80]!r} (and {vectors[0].shape} for the first)")
            if not np.all(np.abs(vector) <= MAX_MAGNITUDE):  # NaN fails this too
                raise ValueError(f"vector_reward returned {vector.tolist()} for {answer[:80]!r}: every objective must be "
                                 f"finite and at most {MAX_MAGNITUDE:g} in magnitude")
        rewards = np.stack(vectors)
        w = self.weightings(prompt, step, rewards.shape[1])
        return float(vpo_scores(rewards[None, None], w[None])[0, 0])

    def __call__(self, prompts, completions, trainer_state=None, **_) -> list[float]:
        step = trainer_state.global_step if trainer_state is not None else 0
        return [self.score(p, completion_text(c), step) for p, c in zip(prompts, completions)]
