"""A tiny real Task for trainer tests: rewards a random character model can already earn.

An answer is a string; its reward vector is [fraction of lowercase letters, fraction of
digits]. m answers are separated by "|". Not registered: tests construct it directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tasks.base import Instance, ParseError, TemplateMismatch


class CharMix:
    name = "charmix"
    objectives = ("letters", "digits")
    weights = np.array([1.0, 1.0])

    def instances(self, split: str, count: int, seed: int = 0) -> list[Instance]:
        offset = 0 if split == "train" else 10**6
        return [Instance(self.name, split, offset + seed * 1000 + i, None) for i in range(count)]

    def prompt(self, instance: Instance, m: int = 1) -> str:
        return f"mix{instance.index % 7}:" if m == 1 else f"mix{instance.index % 7} x{m}:"

    def parse(self, instance: Instance, completion: str, m: int = 1) -> list[str]:
        if "\n" in completion:
            raise ParseError("newline in the answer")
        answers = completion.split("|")
        if len(answers) != m:
            raise TemplateMismatch(f"{len(answers)} answers, expected {m}")
        return answers

    def score(self, instance: Instance, answers: Sequence[str]) -> np.ndarray:
        rows = [[sum(c.islower() for c in a) / len(a), sum(c.isdigit() for c in a) / len(a)] if a else [0.0, 0.0] for a in answers]
        return np.array(rows, dtype=np.float64).reshape(len(answers), 2)

    def demonstrations(self, instance: Instance, m: int, rng: np.random.Generator) -> str:
        return "|".join("".join(rng.choice(list("ab12"), size=4)) for _ in range(m))

    def problem_spec(self, instance: Instance, directory: Path) -> Path:
        raise NotImplementedError("the toy task is not searchable")


class GoalCharMix(CharMix):
    """CharMix with the optional Task methods: a similarity of two answers (the share of
    positions where they agree) and a prompt that shows a weighting of the objectives."""

    def similarity(self, instance: Instance, a: str, b: str) -> float:
        return sum(x == y for x, y in zip(a, b)) / max(len(a), len(b), 1)

    def prompt_with_weights(self, instance: Instance, weights: np.ndarray) -> tuple[str, np.ndarray]:
        percent = round(100 * float(weights[0]))
        return f"mix{instance.index % 7} w{percent:03d}:", np.array([percent, 100 - percent]) / 100
