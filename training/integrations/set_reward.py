"""The set-score reward of the project's tasks, as one score per rollout for a group z-score.

A completion is parsed with the project's strict rules (`tasks.completions.score_completion`)
into its (m, d) reward matrix; `set_score` turns that into the one score the estimator
z-scores within a group: grpo the answer's scalar, multi_rlvr the sum of the set's scalars,
random_weight_grpo one Dirichlet weighting's value, vpo R(S) = mean over K Dirichlet
weightings of the set's best answer. The weightings come from (seed, step, instance), so every
rollout of a group sees the same ones, exactly as `training.advantages.compute` draws them for
a group of one prompt. Used by `training.integrations.trl` (TRL) and `.verl` (veRL).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evo.errors import UserError
from evo.scores import scalarize
from tasks.base import Instance, Task
from tasks.completions import score_many
from training.advantages import dirichlet_weights, option_problem, vpo_scores

ALGOS = ("grpo", "multi_rlvr", "random_weight_grpo", "vpo")  # a group z-score of one score per rollout


def check(algo: str, options: dict, who: str = "--engine trl") -> None:
    """One line for an estimator this reward cannot express or an option its estimator does not take."""
    if algo not in ALGOS:
        raise UserError(f"{who} runs {', '.join(ALGOS)} (a group z-score of one score per rollout); got {algo}")
    problem = option_problem(algo, options)
    if problem:
        raise UserError(f"bad --option for {algo}: {problem}")


def group_weightings(algo: str, d: int, seed: int, step: int, key: int, options: dict) -> np.ndarray | None:
    """The weightings shared by one group: (K, d) for vpo, (1, d) for random_weight_grpo."""
    rng = np.random.default_rng([seed, step, key])
    if algo == "vpo":
        return dirichlet_weights(rng, 1, options.get("K", 100), d, options.get("alpha", 1.0), options.get("sobol", False))[0]
    if algo == "random_weight_grpo":
        return rng.dirichlet(np.full(d, options.get("alpha", 1.0)), size=1)
    return None


def set_score(algo: str, matrix: np.ndarray, weights: np.ndarray, w: np.ndarray | None) -> float:
    """The one score of a rollout's (m, d) reward matrix that `algo` z-scores within a group."""
    if algo == "grpo":
        return float(scalarize(matrix[0], weights))
    if algo == "multi_rlvr":
        return float(scalarize(matrix, weights).sum())
    assert w is not None, f"{algo} scores under weightings (group_weightings draws them)"
    if algo == "random_weight_grpo":
        return float(matrix[0] @ w[0])
    return float(vpo_scores(matrix[None, None], w[None])[0, 0])


def completion_text(completion) -> str:
    """A completion as text (conversational datasets give a list of messages)."""
    return completion if isinstance(completion, str) else completion[-1]["content"]


class SetReward:
    """TRL reward function: the set score of each completion (dataset column `instance`)."""

    def __init__(self, task: Task, instances: Sequence[Instance], algo: str, m: int, *, seed: int,
                 options: dict, eos_ids: Sequence[int]) -> None:
        check(algo, options)
        self.task, self.instances, self.algo, self.m = task, list(instances), algo, m
        self.seed, self.options, self.eos_ids = seed, dict(options), set(eos_ids)
        self.__name__ = algo  # TRL logs rewards/<name>/mean

    def matrices(self, completions, completion_ids, instance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(N, m, d) reward matrices, parsed flags and finished flags of a batch of completions."""
        finished = np.array([bool(ids) and ids[-1] in self.eos_ids for ids in completion_ids])
        rows = [(self.instances[key], completion_text(text), bool(done)) for text, key, done in zip(completions, instance, finished)]
        out, parsed = score_many(self.task, rows, self.m)
        return out, parsed, finished

    def __call__(self, prompts, completions, completion_ids, instance, trainer_state=None, log_metric=None, **_) -> list[float]:
        step = trainer_state.global_step if trainer_state is not None else 0
        rewards, parsed, finished = self.matrices(completions, completion_ids, instance)
        d, weights = rewards.shape[2], np.asarray(self.task.weights, dtype=np.float64)
        shared = {key: group_weightings(self.algo, d, self.seed, step, key, self.options) for key in set(instance)}
        scores = [set_score(self.algo, r, weights, shared[key]) for r, key in zip(rewards, instance)]
        if log_metric is not None:
            for name, value in summary(rewards, parsed, finished, self.task.objectives, weights).items():
                log_metric(name, value)
        return scores


def summary(rewards: np.ndarray, parsed: np.ndarray, finished: np.ndarray, objectives: Sequence[str],
            weights: np.ndarray) -> dict:
    """Per-objective means and the deployment scalar of a batch, named as the trainer's metrics."""
    record = {f"reward/{name}": float(rewards[..., j].mean()) for j, name in enumerate(objectives)}
    scalars = scalarize(rewards, weights)
    record.update(scalar=float(scalars.mean()), best_in_set=float(scalars.max(axis=1).mean()),
                  parse_failed=float(1 - parsed.mean()), truncated=float(1 - finished.mean()))
    return record
