"""Problem specs for HumanEval problems, so `evo check` / `evo run` can search one of them.

`solution.py` is the problem's prompt (imports, helpers, signature, docstring) followed by
the body inside the EVOLVE block (`pass` to start with), so the file with the reference
body in place of the block is exactly HumanEval's prompt + canonical solution. `score.py`
holds the problem's tests and runs them on the whole file, one objective per test.
"""

from __future__ import annotations

import json
from pathlib import Path

from tasks.humaneval.data import Problem
from tasks.humaneval.run import run_tests

TIMEOUT = 3.0  # wall seconds per test (HumanEval's own harness gives 3 s per problem)
BLANK_BODY = "pass"

_TOML = """[problem]
name = "{name}"
program = "solution.py"
scorer = "score.py:evaluate"
objectives = {objectives}

[sandbox]
isolation = "process"
timeout = {timeout}

[features.length]
source = "code_length"
range = [0, 2000]
bins = 10

[search]
selection = "lexicase"
iterations = 100
target = 1.0

[prompt]
style = "full"
"""

_SCORER = '''"""Scorer for {task_id} (written by tasks.humaneval.spec): one objective per test."""

from tasks.humaneval.spec import score_file

TIMEOUT = {timeout!r}
TESTS = {tests}


def evaluate(path):
    return score_file(TESTS, TIMEOUT, path)
'''


def objectives(count: int) -> list[str]:
    return [f"test{i}" for i in range(count)]


def program_file(problem: Problem, body: str = BLANK_BODY) -> str:
    """The prompt, then `body` (one indentation level deep) inside the EVOLVE block."""
    indented = "".join(f"    {line}" if line.strip() else line for line in body.strip("\n").splitlines(True))
    return f"{problem.prompt}    # EVOLVE-BLOCK-START\n{indented}\n    # EVOLVE-BLOCK-END\n"


def write_spec(problem: Problem, directory: Path, timeout: float = TIMEOUT) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "solution.py").write_text(program_file(problem))
    tests = json.dumps(list(problem.tests), indent=1)
    (directory / "score.py").write_text(_SCORER.format(task_id=problem.task_id, timeout=timeout, tests=tests))
    spec = directory / "problem.toml"
    name = "humaneval-" + problem.task_id.rpartition("/")[2]
    total = round(len(problem.tests) * timeout + 10.0, 1)
    spec.write_text(_TOML.format(name=name, objectives=json.dumps(objectives(len(problem.tests))), timeout=total))
    return spec


def score_file(tests: list[str], timeout: float, path: str | Path) -> dict[str, float]:
    """1.0 for each test the program file passes, 0.0 for each it fails."""
    passed = run_tests(Path(path).read_text(), tests, timeout)
    return {name: float(ok) for name, ok in zip(objectives(len(tests)), passed)}
