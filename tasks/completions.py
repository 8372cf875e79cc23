"""How one completion of an m-answer prompt is scored — the rules shared by RL rollouts and
by `evo compare`.

Two switches:
- `dedup` (the training reward, default): duplicate answers are removed and the matrix padded
  with zero rows, so a repeated answer earns nothing. Without it (evaluation) every answer is
  scored alone, as it stands: a repeat keeps its real vector, in its own position.
- `by_answer`: each answer of the set is parsed alone (for a task that can split a completion
  into its answers, `Divisible`), so a malformed answer scores zero alone, a set with too few
  answers keeps the ones it has and one with too many its first m; a completion cut off by
  the token budget loses only its unfinished last answer. Without it (default) a completion
  that does not parse, has the wrong number of answers or was truncated scores all zeros.

Evaluation (`EVALUATION`: evaluate.py, `evo compare`) uses both off-default settings; training
uses the defaults unless `evo train --score-by-answer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from tasks.base import Concurrent, Divisible, Instance, ParseError, Task, TemplateMismatch


@dataclass(frozen=True)
class Scoring:
    dedup: bool = True  # a repeated answer scores a zero row (the training reward)
    by_answer: bool = False  # answers parsed one by one: a malformed answer scores zero alone


TRAINING = Scoring()
EVALUATION = Scoring(dedup=False, by_answer=True)


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


def answers_one_by_one(task: Task, instance: Instance, text: str, finished: bool, m: int) -> list[Any | None] | None:
    """m slots, each an answer parsed alone or None (malformed, missing, or cut off by the
    token budget); None when the task cannot split a completion into answers."""
    if not isinstance(task, Divisible):
        return None
    pieces = task.answer_texts(text)
    if not finished:
        pieces = pieces[:-1]
    slots: list[Any | None] = []
    for piece in pieces[:m]:
        try:
            slots.append(task.parse(instance, piece, 1)[0])
        except (ParseError, TemplateMismatch):
            slots.append(None)
    return slots + [None] * (m - len(slots))


def score_completion(task: Task, instance: Instance, text: str, finished: bool, m: int,
                     scoring: Scoring = TRAINING) -> tuple[np.ndarray, bool]:
    """The (m, d) reward matrix of one completion and whether it parsed (as a whole set)."""
    matrix = np.zeros((m, len(task.objectives)))
    slots = answers_one_by_one(task, instance, text, finished, m) if scoring.by_answer else None
    if slots is None:
        answers = parsed_answers(task, instance, text, finished, m)
        if answers is None:
            return matrix, False
        if scoring.dedup:
            if answers:
                matrix[: len(answers)] = task.score(instance, answers)
            return matrix, True
        slots = task.parse(instance, text, m)
    if scoring.dedup:  # scored together, so the task's own notion of a repeat applies too (a maze route's path)
        seen: set[str] = set()
        present = []
        for i, answer in enumerate(slots):
            if answer is not None and repr(answer) not in seen:
                seen.add(repr(answer))
                present.append(i)
        if present:
            matrix[present] = task.score(instance, [slots[i] for i in present])
    else:
        for i, answer in enumerate(slots):
            if answer is not None:
                matrix[i] = task.score(instance, [answer])[0]
    return matrix, _whole_set_parses(task, instance, text, finished, m)


def score_many(task: Task, rows: Sequence[tuple[Instance, str, bool]], m: int,
               scoring: Scoring = TRAINING) -> tuple[np.ndarray, np.ndarray]:
    """`score_completion` of each (instance, text, finished): (n, m, d) reward matrices and (n,)
    parsed flags; from several threads for a `Concurrent` task (HumanEval's sandbox)."""
    matrices = np.zeros((len(rows), m, len(task.objectives)))
    parsed = np.zeros(len(rows), dtype=bool)

    def one(row: tuple[Instance, str, bool]) -> tuple[np.ndarray, bool]:
        return score_completion(task, *row, m, scoring)

    workers = min(task.scoring_workers if isinstance(task, Concurrent) else 1, len(rows))
    if workers > 1:
        with ThreadPoolExecutor(workers, thread_name_prefix="evo-score") as pool:
            results = list(pool.map(one, rows))
    else:
        results = [one(row) for row in rows]
    for i, (matrix, ok) in enumerate(results):
        matrices[i], parsed[i] = matrix, ok
    return matrices, parsed


def _whole_set_parses(task: Task, instance: Instance, text: str, finished: bool, m: int) -> bool:
    if not finished:
        return False
    try:
        task.parse(instance, text, m)
    except (ParseError, TemplateMismatch):
        return False
    return True
