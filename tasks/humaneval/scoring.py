"""How the humaneval Task scores answers: through a sandbox of its own (evo.sandbox, the
isolation `evo run` uses), never in the caller's process, so training and `evo compare`
score hostile samples as safely as a search does.

The Task writes each answer as a program file whose first line names the problem and the
per-test time limit (`# evo-humaneval HumanEval/53 3.0`), then the problem's prompt, then
the answer; `score_program` (the sandbox's scorer, run in its scorer process) reads that
line and the prompt before the candidate's code runs (the answer comes after both), runs
the problem's tests (tasks.humaneval.run) and returns the WIDTH-long padded vector.
The sandbox imports it from tasks.humaneval.scorer, whose import reads the problems once,
in the warm worker, not in every evaluation.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tasks.humaneval import formats
from tasks.humaneval.data import WIDTH, HumanEvalProblem
from tasks.humaneval.run import run_tests
from tasks.humaneval.spec import objectives

HEADER = "# evo-humaneval"


def padded(passed: Sequence[bool]) -> np.ndarray:
    """The WIDTH-long vector of one answer: its test results, then its pass rate."""
    row = np.full(WIDTH, float(np.mean(passed)) if len(passed) else 0.0)
    row[: len(passed)] = np.asarray(passed, dtype=np.float64)
    return row


def program_text(problem: HumanEvalProblem, answer: str, timeout: float) -> str:
    return f"{HEADER} {problem.task_id} {timeout!r}\n" + formats.program(problem, answer)


def score_program(path: str, by_id: dict[str, HumanEvalProblem]) -> list[float]:
    """The sandbox's scorer: the padded test vector of the program file at `path`."""
    text = Path(path).read_text(encoding="utf-8")  # (before the candidate runs: it may rewrite its file)
    first, _, rest = text.partition("\n")
    words = first.split()
    problem = by_id.get(words[2]) if len(words) == 4 and f"{words[0]} {words[1]}" == HEADER else None
    if problem is None or not rest.startswith(problem.prompt):
        raise ValueError("not a humaneval program file (its first line names no problem)")
    return padded(run_tests(path, problem.prompt, problem.entry_point, problem.tests, float(words[3]))).tolist()


def _close_in(sandbox, pid: int) -> None:
    """Close `sandbox` at exit, only in the process that started it (not in a forked copy)."""
    if os.getpid() == pid:
        sandbox.close()


class SandboxScorer:
    """The Task's sandbox, started on first use (its workers import the scorer once)."""

    def __init__(self, timeout: float, workers: int = 2):
        self.timeout, self.workers = timeout, workers
        self._sandbox = None
        self._pid = os.getpid()
        self._lock = threading.Lock()

    def rows(self, problem: HumanEvalProblem, answers: Sequence[str]) -> np.ndarray:
        """One padded row per answer; an evaluation that failed (timeout, memory, ...) scores zeros."""
        sandbox = self._started()
        futures = [sandbox.submit(program_text(problem, answer, self.timeout)) for answer in answers]
        rows = np.zeros((len(answers), WIDTH))
        for i, future in enumerate(futures):
            evaluation = future.result()
            if evaluation.ok:
                rows[i] = evaluation.scores
        return rows

    def _started(self):
        with self._lock:
            if self._pid != os.getpid():  # a forked copy of the caller: the sandbox's pipes are its parent's
                self._sandbox, self._pid = None, os.getpid()
            if self._sandbox is None:
                from evo.sandbox import Sandbox, SandboxLimits

                limits = SandboxLimits(timeout=WIDTH * self.timeout + 10.0, workers=self.workers)
                self._sandbox = Sandbox("tasks.humaneval.scorer:evaluate", objectives(WIDTH), limits)
                weakref.finalize(self, _close_in, self._sandbox, self._pid)
            return self._sandbox

    def close(self) -> None:
        with self._lock:
            if self._sandbox is not None:
                self._sandbox.close()
                self._sandbox = None
