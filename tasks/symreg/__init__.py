"""Symbolic regression with a per-region reward vector.

Test instances are the benchmark problems (Nguyen-1..12, then Feynman); train instances
are random grammar expressions, for the supervised warm-up. An answer is a Python
expression over x0..xk; its reward is the accuracy in each of 8 input-space regions.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tasks.base import Instance, ParseError, TemplateMismatch
from tasks.symreg.data import REGIONS, Dataset, arrays, recovered, region_scores
from tasks.symreg.expressions import canonical, compile_expression, parse_expression, random_expression
from tasks.symreg.problems import FEYNMAN, NGUYEN, PROBLEMS, SymregProblem

SEPARATOR = " | "
OBJECTIVES = tuple(f"region{r}" for r in range(REGIONS))
_TRAIN_RANGES = ((-1.0, 1.0), (0.0, 2.0), (0.0, 1.0), (1.0, 5.0))


def _random_problem(index: int, rng: np.random.Generator) -> SymregProblem:
    arity = int(rng.integers(1, 3))
    ranges = (_TRAIN_RANGES[rng.integers(len(_TRAIN_RANGES))],) * arity
    for _ in range(100):
        formula = random_expression(arity, rng)
        y = compile_expression(formula, arity)(rng.uniform(*ranges[0], size=(64, arity)))
        if np.all(np.isfinite(y)) and np.std(y) > 1e-3 and np.max(np.abs(y)) < 1e3:
            return SymregProblem(f"random-{index}", formula, ranges)
    return SymregProblem(f"random-{index}", "x0", ranges)


class SymregTask:
    """Symbolic regression (Nguyen, Feynman); reward = accuracy per input-space region."""

    name = "symreg"
    objectives = OBJECTIVES
    weights = np.ones(REGIONS)
    benchmark = NGUYEN + FEYNMAN

    def instances(self, split: str, count: int, seed: int = 0) -> list[Instance]:
        if split == "test":  # the benchmark in order; beyond it, again with other data seeds
            problems = [self.benchmark[i % len(self.benchmark)] for i in range(count)]
        elif split == "train":
            problems = [_random_problem(i, np.random.default_rng([seed, 7, i])) for i in range(count)]
        else:
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        return [Instance(self.name, split, i, (p, Dataset(p.formula, p.ranges, seed * 1000 + i)))
                for i, p in enumerate(problems)]

    def prompt(self, instance: Instance, m: int = 1) -> str:
        _, data = instance.data
        table = arrays(data)
        names = " ".join(f"x{i}" for i in range(data.arity))
        lines = [" ".join(f"{v:.3g}" for v in row) + f" -> {y:.3g}" for row, y in zip(table.X_prompt, table.y_prompt)]
        return "\n".join([f"{names} -> y", *lines, f"exprs {m}"]) + "\n"

    def parse(self, instance: Instance, completion: str, m: int = 1) -> list[str]:
        _, data = instance.data
        if not completion.strip():
            raise ParseError("empty completion")
        parts = [part.strip() for part in completion.strip().split("|")]
        if len(parts) != m:
            raise TemplateMismatch(f"expected {m} expression(s), found {len(parts)}")
        for part in parts:
            parse_expression(part, data.arity)
        return parts

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
        """The ground-truth formula scores 1 in every region, so the best scalar is 1."""
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
        from tasks.symreg.spec import write_spec

        problem, data = instance.data
        return write_spec(problem, data, Path(directory))


def problem(name: str) -> SymregProblem:
    if name not in PROBLEMS:
        raise KeyError(f"unknown symreg problem {name!r}; known: {', '.join(PROBLEMS)}")
    return PROBLEMS[name]


__all__ = ["OBJECTIVES", "SymregTask", "problem"]
