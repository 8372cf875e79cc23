"""Symbolic regression with a per-region reward vector.

Splits (tasks/symreg/splits.py): `train`, random grammar formulas for the supervised warm-up;
`test`, held-out random formulas from a stream of their own, any count and seed; `benchmark`,
Nguyen-1..12 and 14 Feynman equations. An answer is a Python expression over x0..xk; its
reward is the accuracy in each of 8 input-space regions.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tasks.base import Instance, ParseError, TemplateMismatch
from tasks.symreg.data import REGIONS, Arrays, arrays, recovered, region_scores
from tasks.symreg.expressions import canonical, compile_expression, parse_expression, random_expression
from tasks.symreg.problems import PROBLEMS, SymregProblem
from tasks.symreg.splits import BENCHMARK, SPLITS, problems

SEPARATOR = " | "
OBJECTIVES = tuple(f"region{r}" for r in range(REGIONS))


def prompt_text(table: Arrays, arity: int, m: int = 1) -> str:
    """The prompt for data points: a header, the prompt points (x -> y), `exprs m`."""
    names = " ".join(f"x{i}" for i in range(arity))
    lines = [" ".join(f"{v:.3g}" for v in row) + f" -> {y:.3g}" for row, y in zip(table.X_prompt, table.y_prompt)]
    return "\n".join([f"{names} -> y", *lines, f"exprs {m}"]) + "\n"


def parse_answers(completion: str, arity: int, m: int = 1) -> list[str]:
    """The m expressions of a completion (`e1 | e2 | ...`), strictly: ParseError when one is not
    a valid expression over x0..x{arity-1}, TemplateMismatch when there are not m of them."""
    if not completion.strip():
        raise ParseError("empty completion")
    parts = [part.strip() for part in completion.strip().split("|")]
    if len(parts) != m:
        raise TemplateMismatch(f"expected {m} expression(s), found {len(parts)}")
    for part in parts:
        parse_expression(part, arity)
    return parts


class SymregTask:
    """Symbolic regression (Nguyen, Feynman); reward = accuracy per input-space region."""

    name = "symreg"
    objectives = OBJECTIVES
    weights = np.ones(REGIONS)
    benchmark = BENCHMARK
    splits = SPLITS

    def instances(self, split: str, count: int, seed: int = 0) -> list[Instance]:
        """`train` | `test` (held-out random formulas) | `benchmark` (Nguyen, Feynman); data
        (problem, Dataset)."""
        return [Instance(self.name, split, i, pair) for i, pair in enumerate(problems(split, count, seed))]

    def prompt(self, instance: Instance, m: int = 1) -> str:
        _, data = instance.data
        return prompt_text(arrays(data), data.arity, m)

    def parse(self, instance: Instance, completion: str, m: int = 1) -> list[str]:
        _, data = instance.data
        return parse_answers(completion, data.arity, m)

    def score(self, instance: Instance, answers: Sequence[str]) -> np.ndarray:
        """One row per answer; a repeat of an earlier expression (same AST) scores zeros."""
        _, data = instance.data
        rows = np.zeros((len(answers), REGIONS))
        seen: set[str] = set()
        for i, answer in enumerate(answers):
            try:
                key = canonical(parse_expression(answer, data.arity))
            except ParseError:
                continue
            if key in seen:
                continue
            seen.add(key)
            rows[i] = region_scores(compile_expression(answer, data.arity)(arrays(data).X_eval), data)
        return rows

    def recovered(self, instance: Instance, answer: str) -> bool:
        _, data = instance.data
        return recovered(compile_expression(answer, data.arity)(arrays(data).X_dense), data)

    def oracle_best(self, instance: Instance) -> float:
        """The ground-truth formula scores 1 in every region, so the best scalar is 1 (the test
        split keeps only formulas finite everywhere: tasks/symreg/splits.py `well_posed`)."""
        return 1.0

    def oracle_front(self, instance: Instance) -> np.ndarray:
        """The ground truth dominates every other expression: the front is its all-ones vector."""
        return np.ones((1, len(self.objectives)))

    def demonstrations(self, instance: Instance, m: int, rng: np.random.Generator) -> str:
        """The formula and m - 1 other random expressions, in random order."""
        problem, data = instance.data
        answers = [problem.formula] + [random_expression(data.arity, rng) for _ in range(m - 1)]
        return SEPARATOR.join(answers[i] for i in rng.permutation(m))

    def problem_spec(self, instance: Instance, directory: Path) -> Path:
        """The instance as a spec whose EVOLVE block is one expression, shown after the task's
        own prompt (`continue`), with the task's m-answer prompt as its set head."""
        from tasks.symreg.spec import write_instance_spec

        problem, data = instance.data
        return write_instance_spec(problem.name, data, Path(directory), target=self.oracle_best(instance))


def problem(name: str) -> SymregProblem:
    if name not in PROBLEMS:
        raise KeyError(f"unknown symreg problem {name!r}; known: {', '.join(PROBLEMS)}")
    return PROBLEMS[name]


__all__ = ["OBJECTIVES", "SEPARATOR", "SymregTask", "parse_answers", "problem", "prompt_text"]
