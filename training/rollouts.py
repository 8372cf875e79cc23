"""Rollouts: G sampled completions per prompt, parsed strictly and scored as reward matrices.

A rollout of a multi-answer method holds m answers in one completion. Scoring rules (shared
by every estimator): duplicate answers are removed and the matrix padded with zero rows; a
completion that does not parse (or has the wrong number of answers) scores all zeros; a
completion cut off by the token budget (no eos) scores all zeros. A method whose answer
count does not match the prompt template raises before any sampling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from evo.errors import UserError
from evo.policies.sampler import Rollout, Sampler
from tasks.base import GoalConditioned, Instance, Task
from tasks.completions import TRAINING, Scoring, score_many
from training import search_signal
from training.advantages import entry


@dataclass(frozen=True)
class Rollouts:
    instances: list[Instance]
    samples: Rollout  # token tensors; row i * G + j is rollout j of prompt i
    texts: list[str]  # B * G completions, rows of one prompt adjacent
    rewards: np.ndarray  # (B, G, m, d)
    parse_failed: np.ndarray  # (B, G) bool
    truncated: np.ndarray  # (B, G) bool
    kinds: np.ndarray  # (B, G) what each completion became (training.search_signal.KINDS)


@runtime_checkable
class BatchScored(Protocol):
    """Optional: a single-answer task that scores a whole step's completions at once (e.g. a
    spec's programs, concurrently in a sandbox pool: training/spec_task.py), whose prompts may
    end at stop strings, and whose prompts were built against a front of earlier answers."""

    def stop(self, instances: Sequence[Instance]) -> tuple[str, ...]:
        """The stop strings of these instances' prompts."""
        ...

    def score_completions(self, instances: Sequence[Instance],
                          completions: Sequence[Sequence[Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rewards (B * G, 1, d), parsed (B * G,) and what each became (B * G,: search_signal
        KINDS codes) of each instance's G completions (objects with `text` and `finish_reason`),
        under training/search_signal.py's rule."""
        ...

    def front(self, instances: Sequence[Instance]) -> np.ndarray:
        """(B, p, d): the front F each prompt was built against, NaN-padded."""
        ...


def check_template(task: Task, instance: Instance, algo: str, m: int) -> None:
    """Raise UserError when the prompt template cannot serve `algo` with `m` answers."""
    multi = entry(algo).multi_answer
    if multi and m < 2:
        raise UserError(f"{algo} trains on sets of answers: use --answers 2 or more (got {m})")
    if not multi and m != 1:
        raise UserError(f"{algo} is a single-answer method but {m} answers per rollout were requested")
    if entry(algo).goal_conditioned and not isinstance(task, GoalConditioned):
        raise UserError(f"{algo} writes a weighting into the prompt, but task {task.name!r} has no prompt_with_weights")
    if m > 1 and task.prompt(instance, m) == task.prompt(instance, 1):
        raise UserError(f"task {task.name!r} renders the same prompt for {m} answers and for 1: it has no multi-answer template")


def collect(
    model: torch.nn.Module,
    tokenizer,
    task: Task,
    instances: Sequence[Instance],
    *,
    m: int,
    group: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int = 0,
    prompts: Sequence[str] | None = None,
    sampler=None,
    encode: Callable[[Sequence[str]], list[list[int]]] | None = None,
    scoring: Scoring = TRAINING,
) -> Rollouts:
    """Sample `group` completions for each instance's m-answer prompt (or the given `prompts`,
    one per instance) and score them.

    `sampler` (default: the local Sampler of `model`) takes what `encode` makes of the prompt
    texts (token ids; default: the texts, tokenized by the sampler)."""
    prompts = [task.prompt(i, m) for i in instances] if prompts is None else list(prompts)
    sampler = sampler if sampler is not None else Sampler(model, tokenizer)
    batched = task if isinstance(task, BatchScored) else None
    stop = batched.stop(instances) if batched is not None else ()
    samples = sampler.sample(encode(prompts) if encode is not None else prompts, n=group, max_new_tokens=max_new_tokens,
                             temperature=temperature, top_p=top_p, seed=seed, **({"stop": stop} if stop else {}))
    flat = [c for row in samples.completions for c in row]
    texts = [c.text for c in flat]
    finished = [c.finish_reason == "stop" for c in flat]
    b, d = len(instances), len(task.objectives)
    if batched is not None:
        rewards, parsed, kinds = batched.score_completions(instances, samples.completions)
    else:
        rows = [(instances[row // group], text, finished[row]) for row, text in enumerate(texts)]
        rewards, parsed = score_many(task, rows, m, scoring)
        kinds = search_signal.cut_off(np.where(parsed, search_signal.VALID, search_signal.UNPARSED), ~np.asarray(finished))
    return Rollouts(
        instances=list(instances),
        samples=samples,
        texts=texts,
        rewards=rewards.reshape(b, group, m, d),
        parse_failed=~parsed.reshape(b, group),
        truncated=~np.asarray(finished, dtype=bool).reshape(b, group),
        kinds=np.asarray(kinds).reshape(b, group),
    )
