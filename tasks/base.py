"""The Task contract: a family of problem instances whose answers get reward VECTORS.

`tasks/` knows nothing of search or training (a task that runs candidate code, such as
HumanEval, uses only the sandbox's public face: `evo.sandbox` and `evo.sandbox.candidate`;
tests/test_layers.py holds it to that). Training uses prompts, parsers and scorers; the search
uses only `problem_spec` (a TOML file that `evo run` can search).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np


class ParseError(ValueError):
    """A completion does not follow the task's answer format (scores as all zeros)."""


class TemplateMismatch(ValueError):
    """A completion was parsed with the wrong number of answers for its prompt template."""


@dataclass(frozen=True)
class Instance:
    """One problem of a family. `data` is whatever the family needs (a maze, a formula)."""

    task: str
    split: str  # "train" | "test"
    index: int
    data: Any


@runtime_checkable
class Task(Protocol):
    name: str
    objectives: tuple[str, ...]  # order of the reward vector; higher is better, each in [0, 1]
    weights: np.ndarray  # the deployment scalar = weighted mean with these weights

    def instances(self, split: str, count: int, seed: int = 0) -> list[Instance]:
        """`count` seeded instances of a split; train and test never overlap."""
        ...

    def prompt(self, instance: Instance, m: int = 1) -> str:
        """The prompt asking for `m` answers in one completion (m=1: the single-answer format)."""
        ...

    def parse(self, instance: Instance, completion: str, m: int = 1) -> list[Any]:
        """The answers in a completion, strictly: raises ParseError on a malformed completion
        and TemplateMismatch when the number of answers is not `m`."""
        ...

    def score(self, instance: Instance, answers: Sequence[Any]) -> np.ndarray:
        """Reward vectors, shape (len(answers), d), float64. Invalid answers score zero rows."""
        ...

    def oracle_best(self, instance: Instance) -> float:
        """The best achievable scalar on this instance (exact, e.g. from an oracle search)."""
        ...

    def oracle_front(self, instance: Instance) -> np.ndarray:
        """The Pareto front of achievable reward vectors, shape (p, d) (exact where known)."""
        ...

    def demonstrations(self, instance: Instance, m: int, rng: np.random.Generator) -> str:
        """A completion for `prompt(instance, m)` for the supervised warm-up (no eos)."""
        ...

    def problem_spec(self, instance: Instance, directory: Path) -> Path:
        """Write a problem spec (TOML + initial program + scorer) for `evo run`; return its path."""
        ...


@runtime_checkable
class Divisible(Protocol):
    """Optional: a task that can split an m-answer completion into its answers' texts, each
    parseable on its own with m = 1 (route-by-route scoring, tasks/completions.py)."""

    def answer_texts(self, completion: str) -> list[str]:
        """The completion's answers as texts, in order (however many it has)."""
        ...


@runtime_checkable
class Concurrent(Protocol):
    """Optional: a task whose `score` is thread-safe and waits on a pool of its own (HumanEval's
    sandbox): completions are scored from `scoring_workers` threads at once (score_many in
    tasks/completions.py), so that no worker of the pool idles."""

    scoring_workers: int


@runtime_checkable
class Similar(Protocol):
    """Optional: a task that can say how alike two answers are (for diversity rewards)."""

    def similarity(self, instance: Instance, a: Any, b: Any) -> float:
        """How alike two parsed answers of `instance` are, in [0, 1] (1: the same); symmetric."""
        ...


@runtime_checkable
class GoalConditioned(Protocol):
    """Optional: a task whose single-answer prompt can show a weighting of its objectives."""

    def prompt_with_weights(self, instance: Instance, weights: np.ndarray) -> tuple[str, np.ndarray]:
        """The single-answer prompt that also shows a weighting `weights` (d,) on the simplex,
        and the weighting it shows (`weights` rounded to what the prompt can write; on the
        simplex), which is the one a goal-conditioned reward must use."""
        ...
