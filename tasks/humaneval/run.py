"""Run HumanEval tests on a candidate program: one pass/fail per test, decided here.

This module is the scorer's side; the candidate's code never runs in its process. In the
sandbox (`evo check` / `evo run` on a problem spec, and `Task.score`, which scores through
a sandbox of its own) the candidate is loaded in the sandbox's candidate process
(evo.sandbox.candidate: another uid, no capabilities, no descriptor of the scorer's) and
each test gets a fresh copy of it (a fork of that process, after the program's top-level
code ran) with a wall-clock limit. The test's own code (HumanEval's `check`, split per
test) runs HERE, after the problem's trusted prompt (its imports and helpers, such as
`encode_cyclic` or `poly`), with the entry point bound to the candidate's function: every
call crosses as plain values (numbers, strings, lists, tuples, dicts), so the assertions
compare values, and what the candidate does in its own process (write on its descriptors,
exit early, patch modules) cannot make a test pass. A test passes when it runs to its end.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evo.sandbox import candidate


def run_tests(path: str | Path, prompt: str, entry_point: str, tests: Sequence[str], timeout: float) -> list[bool]:
    """Whether each test snippet runs to its end against the candidate program at `path`
    (each on a fresh copy of the candidate, `timeout` wall seconds at most; the program's
    top-level code gets `timeout` too)."""
    try:
        program = candidate.load(path, timeout)
    except candidate.CandidateError:  # does not compile, its top-level code raised or ran past `timeout`
        return [False] * len(tests)
    if entry_point not in dir(program):
        return [False] * len(tests)
    setup = compile(prompt, "prompt.py", "exec")
    return [_passes(program, setup, entry_point, test, timeout) for test in tests]


def _passes(program: candidate.CandidateModule, setup, entry_point: str, test: str, timeout: float) -> bool:
    try:
        with program.fresh(timeout) as copy:
            namespace = {"__name__": "humaneval_test"}
            exec(setup, namespace)  # the trusted prompt: imports and helpers (its stub is replaced next)
            namespace[entry_point] = getattr(copy, entry_point)
            exec(compile(test, "test.py", "exec"), namespace)
    except Exception:  # an assertion, the candidate's failure (CandidateError), a value the test cannot use
        return False
    return True
