"""A DARLING-style diversity reward: an answer's reward grows with its distance to the other
answers of its prompt group, before any advantage estimator sees the rewards.

DARLING (Li et al., 2025) multiplies an answer's quality by its diversity, the share of the
group's other answers that a learned classifier puts in a different equivalence class. Here
the task supplies a graded similarity of two answers (`task.similarity`, in [0, 1]; for maze
routes the Jaccard overlap of the visited cells) and, for answer i of a group of G,

    div_i = mean_{j != i} (1 - sim(i, j))           in [0, 1]
    r'_i  = r_i * (1 + coef * div_i)                (every objective of r_i alike)

coef = 0 leaves the rewards unchanged; as coef grows r' approaches DARLING's product
r * div up to a factor, which a group z-score ignores. Scaling the whole vector keeps every
estimator's own scalarization (task weights, Dirichlet weights, per-objective z-scores).
A completion that does not parse has no answer: its similarity to every answer is 0 (its
own reward is already zero).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from tasks.base import Instance, Similar, Task
from tasks.completions import parsed_answers
from training.rollouts import Rollouts


def distinctness(similarity: np.ndarray) -> np.ndarray:
    """div (B, G): mean over the other answers of 1 - similarity; 0 for a group of one."""
    g = similarity.shape[-1]
    if g < 2:
        return np.zeros(similarity.shape[:-1])
    others = (1.0 - similarity).sum(axis=-1) - (1.0 - np.diagonal(similarity, axis1=-2, axis2=-1))
    return others / (g - 1)


def diversity_scaled(rewards: np.ndarray, similarity: np.ndarray, coef: float) -> np.ndarray:
    """Rewards (B, G, 1, d) scaled by 1 + coef * div from a (B, G, G) similarity matrix."""
    if rewards.shape[2] != 1:
        raise ValueError(f"the diversity reward is for single-answer rollouts; rewards have m={rewards.shape[2]}")
    if similarity.shape != rewards.shape[:2] + rewards.shape[1:2]:
        raise ValueError(f"similarity must have shape (B, G, G), got {similarity.shape} for rewards {rewards.shape}")
    factor = 1.0 + coef * distinctness(similarity)
    return rewards * factor[:, :, None, None]


def similarity_matrix(task: Similar, instances: Sequence[Instance], answers: Sequence[Any | None], group: int) -> np.ndarray:
    """(B, G, G) similarities of each group's answers (row i * G + j of `answers` is rollout j
    of instance i; None for a completion without an answer, similarity 0 to everything)."""
    b = len(instances)
    sim = np.zeros((b, group, group))
    for i, instance in enumerate(instances):
        own = answers[i * group:(i + 1) * group]
        for j in range(group):
            for k in range(j + 1, group):
                if own[j] is not None and own[k] is not None:
                    sim[i, j, k] = sim[i, k, j] = task.similarity(instance, own[j], own[k])
        sim[i][np.diag_indices(group)] = 1.0
    return sim


class SimilarTask(Task, Similar, Protocol):
    """A task that can say how alike two of its answers are."""


def rollout_similarity(task: SimilarTask, rolls: Rollouts) -> np.ndarray:
    """(B, G, G) similarities of single-answer rollouts' answers (parsed as scoring does)."""
    group = rolls.rewards.shape[1]
    answers = []
    for row, text in enumerate(rolls.texts):
        parsed = parsed_answers(task, rolls.instances[row // group], text, not rolls.truncated.flat[row], 1)
        answers.append(parsed[0] if parsed else None)
    return similarity_matrix(task, rolls.instances, answers, group)
