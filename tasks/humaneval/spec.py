"""Problem specs for HumanEval problems, so `evo check` / `evo run` can search one of them.

`solution.py` is the problem's prompt (imports, helpers, signature, docstring) followed by
the body inside the EVOLVE block (`pass` to start with), so the file with the reference
body in place of the block is exactly HumanEval's prompt + canonical solution. `score.py`
holds the problem's prompt and tests and runs the tests on the whole file, one objective per
test, through the sandbox's candidate process (tasks.humaneval.run).
"""

from __future__ import annotations

import json
from pathlib import Path

from tasks.humaneval.data import HumanEvalProblem
from tasks.humaneval.run import run_tests
from tasks.spec_files import problem_tables, scorer_file, write_problem

TIMEOUT = 3.0  # wall seconds per test (HumanEval's own harness gives 3 s per problem)
BLANK_BODY = "pass"

def objectives(count: int) -> list[str]:
    return [f"test{i}" for i in range(count)]


def program_file(problem: HumanEvalProblem, body: str = BLANK_BODY) -> str:
    """The prompt, then `body` (one indentation level deep) inside the EVOLVE block."""
    indented = "".join(f"    {line}" if line.strip() else line for line in body.strip("\n").splitlines(True))
    return f"{problem.prompt}    # EVOLVE-BLOCK-START\n{indented}\n    # EVOLVE-BLOCK-END\n"


def write_spec(problem: HumanEvalProblem, directory: Path, timeout: float = TIMEOUT, target: float = 1.0) -> Path:
    """The problem's spec; `target`: the best scalar (1: every test passes, as the reference does)."""
    tests = json.dumps(list(problem.tests), indent=1)
    tables = problem_tables("humaneval-" + problem.task_id.rpartition("/")[2], "solution.py",
                            objectives(len(problem.tests)), target=target, timeout=round(len(problem.tests) * timeout + 10.0, 1),
                            iterations=100, features={"length": ("code_length", [0, 2000], 10)})
    scorer = scorer_file(f"{problem.task_id}, one objective per test", "tasks.humaneval.spec:score_file",
                         {"PROMPT": repr(problem.prompt), "ENTRY_POINT": repr(problem.entry_point), "TESTS": tests,
                          "TIMEOUT": repr(timeout)})
    return write_problem(directory, tables, {"solution.py": program_file(problem), "score.py": scorer})


def score_file(prompt: str, entry_point: str, tests: list[str], timeout: float, path: str | Path) -> dict[str, float]:
    """1.0 for each test the program file passes, 0.0 for each it fails."""
    passed = run_tests(path, prompt, entry_point, tests, timeout)
    return {name: float(ok) for name, ok in zip(objectives(len(tests)), passed)}
