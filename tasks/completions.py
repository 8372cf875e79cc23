"""How one completion of an m-answer prompt is scored — the rules shared by RL rollouts and
by `evo compare`: duplicate answers are removed and the matrix padded with zero rows; a
completion that does not parse (or has the wrong number of answers) scores all zeros; a
completion cut off by the token budget scores all zeros."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tasks.base import Instance, ParseError, Task, TemplateMismatch


def unique(answers: Sequence[Any]) -> list[Any]:
    """The answers in order with repeats dropped (compared by their repr)."""
    seen: set[str] = set()
    kept = []
    for answer in answers:
        key = repr(answer)
        if key not in seen:
            seen.add(key)
            kept.append(answer)
    return kept


def parsed_answers(task: Task, instance: Instance, text: str, finished: bool, m: int) -> list[Any] | None:
    """The distinct answers of one completion, or None when it was truncated or does not parse."""
    if not finished:
        return None
    try:
        return unique(task.parse(instance, text, m))
    except (ParseError, TemplateMismatch):
        return None


def score_completion(task: Task, instance: Instance, text: str, finished: bool, m: int) -> tuple[np.ndarray, bool]:
    """The (m, d) reward matrix of one completion and whether it parsed."""
    matrix = np.zeros((m, len(task.objectives)))
    answers = parsed_answers(task, instance, text, finished, m)
    if answers is None:
        return matrix, False
    if answers:
        matrix[: len(answers)] = task.score(instance, answers)
    return matrix, True
