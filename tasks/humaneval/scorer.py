"""The scorer `Task.score`'s sandbox imports (tasks.humaneval.scoring): the problems are
read here, once per warm worker."""

from tasks.humaneval.data import problems
from tasks.humaneval.scoring import score_program

BY_ID = {p.task_id: p for p in problems()}


def evaluate(path: str) -> list[float]:
    return score_program(path, BY_ID)
