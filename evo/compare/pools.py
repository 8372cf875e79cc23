"""Matched candidate pools: every policy answers the same held-out instances with the same
number of candidate answers (a rollout of m answers counts as m candidates)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from evo.policies.base import Policy
from tasks.base import Instance, Task
from tasks.completions import score_completion


@dataclass(frozen=True)
class Contender:
    name: str
    uri: str
    answers: int  # m: answers per completion (1 = the single-answer prompt)


@dataclass(frozen=True)
class Sampling:
    pool: int = 30  # candidate answers per instance, for every policy
    tokens_per_answer: int = 64  # a 21-move maze route is 65 characters with its separator
    temperature: float = 0.7
    top_p: float = 1.0
    batch: int = 16  # instances per policy call
    seed: int = 0

    def rollouts(self, answers: int) -> int:
        if self.pool % answers:
            raise ValueError(f"the pool ({self.pool}) must be a multiple of the answers per rollout ({answers})")
        return self.pool // answers


def sample_pool(
    policy: Policy,
    task: Task,
    instances: Sequence[Instance],
    answers: int,
    sampling: Sampling,
    progress: Callable[[int], None] = lambda done: None,
) -> np.ndarray:
    """Reward vectors of every candidate answer: shape (instances, pool, d)."""
    rollouts = sampling.rollouts(answers)
    vectors = np.zeros((len(instances), sampling.pool, len(task.objectives)))
    for start in range(0, len(instances), sampling.batch):
        chunk = instances[start : start + sampling.batch]
        replies = policy.generate(
            [task.prompt(instance, answers) for instance in chunk],
            n=rollouts,
            max_new_tokens=sampling.tokens_per_answer * answers + 8,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            seed=sampling.seed + start,
        )
        for offset, (instance, completions) in enumerate(zip(chunk, replies)):
            rows = [
                score_completion(task, instance, c.text, c.finish_reason == "stop", answers)[0] for c in completions
            ]
            vectors[start + offset] = np.concatenate(rows)
        progress(len(chunk))
    return vectors
