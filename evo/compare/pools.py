"""Matched candidate pools: every policy answers the same held-out instances with the same
number of candidate answers (a rollout of m answers counts as m candidates)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from evo.policies.base import Policy
from tasks.base import GoalConditioned, Instance, Task
from tasks.completions import EVALUATION, Scoring, score_many


@dataclass(frozen=True)
class Contender:
    name: str
    uri: str
    answers: int  # m: answers per completion (1 = the single-answer prompt)


FALLBACK_TOKENS = 64  # tokens per answer when no policy records its own: a 21-move maze route is 65 characters


def answer_budget(trained: Sequence[int | None]) -> int:
    """Tokens per answer for every policy of a comparison (equal budgets): the largest any policy's
    checkpoint was trained to write an answer in (`evo.policies.trained_tokens` of each), so no
    policy's answers are cut shorter than in its training; FALLBACK_TOKENS when none records one."""
    return max((t for t in trained if t), default=FALLBACK_TOKENS)


def budget_warnings(tokens_per_answer: int, trained: dict[str, int | None]) -> list[str]:
    """One line for each policy trained to write longer answers than `tokens_per_answer` allows."""
    return [f"warning: {name} was trained to write answers of up to {t} tokens; --tokens-per-answer {tokens_per_answer} "
            f"may cut them (leave it out to sample every policy at the largest trained budget)"
            for name, t in trained.items() if t and t > tokens_per_answer]


@dataclass(frozen=True)
class Sampling:
    pool: int = 30  # candidate answers per instance, for every policy
    tokens_per_answer: int = FALLBACK_TOKENS  # evo compare --task's 0: the policies' trained budget (answer_budget)
    temperature: float = 0.7
    top_p: float = 1.0
    batch: int = 16  # instances per policy call
    seed: int = 0
    slack: int = 8  # tokens allowed beyond tokens_per_answer x answers
    scoring: Scoring = EVALUATION  # every answer as it stands, one by one (tasks/completions.py)

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
    goals: np.ndarray | None = None,
    texts: list | None = None,
    tokens: list | None = None,
) -> np.ndarray:
    """Reward vectors of every candidate answer: shape (instances, pool, d), scored by
    `sampling.scoring` (default: each answer as it stands, route by route). With `goals`
    (instances, pool, d), a goal-conditioned task's weightings, each candidate answers its own
    single-answer prompt showing its weighting (`task.prompt_with_weights`). A `texts` list
    gets, per instance, the [text, finished] of each of its completions (to re-score later); a
    `tokens` list, per instance, the tokens its completions generated over the pool (tokens per
    candidate answer; 0 from a policy that returns no token ids)."""
    rollouts = sampling.rollouts(answers)
    vectors = np.zeros((len(instances), sampling.pool, len(task.objectives)))
    for start in range(0, len(instances), sampling.batch):
        chunk = instances[start : start + sampling.batch]
        if goals is None:
            prompts, per_prompt = [task.prompt(instance, answers) for instance in chunk], rollouts
        else:
            assert isinstance(task, GoalConditioned), "goals are drawn for goal-conditioned tasks only"
            prompts = [task.prompt_with_weights(instance, w)[0] for k, instance in enumerate(chunk) for w in goals[start + k]]
            per_prompt = 1
        replies = policy.generate(
            prompts,
            n=per_prompt,
            max_new_tokens=sampling.tokens_per_answer * answers + sampling.slack,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            seed=sampling.seed + start,
        )
        completions = [c for row in replies for c in row]
        per_instance = [completions[offset * rollouts : (offset + 1) * rollouts] for offset in range(len(chunk))]
        kept = [[[c.text, c.finish_reason == "stop"] for c in done] for done in per_instance]  # texts, whether they finished
        rows = [(instance, c.text, c.finish_reason == "stop") for instance, done in zip(chunk, per_instance) for c in done]
        matrices, _ = score_many(task, rows, answers, sampling.scoring)
        vectors[start : start + len(chunk)] = matrices.reshape(len(chunk), sampling.pool, -1)
        if texts is not None:
            texts.extend(kept)
        if tokens is not None:
            tokens.extend(sum(len(c.token_ids) for c in done) / sampling.pool for done in per_instance)
        progress(len(chunk))
    return vectors


@dataclass(frozen=True)
class HeldOut:
    """Held-out test instances with their oracle: the best scalar and the Pareto front of each."""

    instances: list[Instance]
    optimum: np.ndarray  # (instances,)
    fronts: list[np.ndarray] | None  # (p, d) each; None when not asked for


def held_out(task: Task, count: int, seed: int, *, fronts: bool = True) -> HeldOut:
    """`count` seeded test instances of `task` and their oracle figures."""
    instances = task.instances("test", count, seed=seed)
    optimum = np.array([task.oracle_best(i) for i in instances])
    return HeldOut(instances, optimum, [task.oracle_front(i) for i in instances] if fronts else None)
