"""Problem specs for symbolic regression that a trained expression model can search.

The program file is the task's own one-expression prompt (the data points, `exprs 1`), then
an EVOLVE block holding ONE expression in the task's answer format. With `[prompt] style =
"continue"` a `local:` symreg checkpoint sees exactly its training prompt and writes an
expression; a set search (`[search] answers = m`) asks with the task's m-expression prompt
(`exprs m`, the `set_head` file) and splits the reply at the task's " | ". The block alone is
a Python expression, so `mutate:` (shown the program) edits its constants and operators.

    write_instance_spec(name, data, directory)   # a task instance: formula, ranges, data seed
    write_points_spec(name, table, directory)    # any points, e.g. a user's CSV (tasks/symreg/csv.py)

The scorer, in the sandbox, reads the block back, parses it strictly as the task does, and
returns the 8 region accuracies, `exact` (1.0 when it matches every dense point), `valid` (0.0,
with zero regions, when the block is not one expression) and `length` (its characters).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tasks.base import ParseError, TemplateMismatch
from tasks.spec_files import block_of, problem_tables, scorer_file, write_problem
from tasks.symreg.data import REGIONS, Arrays, Dataset, accuracy, arrays, matches
from tasks.symreg.expressions import compile_expression

PROGRAM_FILE = "expression.txt"
SET_HEAD_FILE = "expression.set.txt"
POINTS_FILE = "points.npz"
START_LINE, END_LINE = "# EVOLVE-BLOCK-START\n", "# EVOLVE-BLOCK-END\n"
OBJECTIVES = [f"region{r}" for r in range(REGIONS)]


def initial_expression(table: Arrays, arity: int) -> str:
    """The mean of the prompt's y plus zero-weight linear and square terms of each variable, in
    the grammar's parenthesized style (so a prefix of it reads like a model's own expression):
    a start whose constants and operators `mutate:` can move."""
    expression = f"{float(np.mean(table.y_prompt)):.3g}"
    for i in range(arity):
        expression = f"(({expression} + (0 * x{i})) + (0 * (x{i})**2))"
    return expression


def program_text(table: Arrays, arity: int, expression: str) -> str:
    """The task's one-expression prompt, then the EVOLVE block holding `expression`."""
    from tasks.symreg import prompt_text

    return prompt_text(table, arity, 1) + START_LINE + expression.strip() + "\n" + END_LINE


def set_head(table: Arrays, arity: int) -> str:
    """The task's m-expression prompt with `{answers}` for m."""
    from tasks.symreg import prompt_text

    return prompt_text(table, arity, 1).removesuffix("exprs 1\n") + "exprs {answers}\n"


def _write(name: str, table: Arrays, arity: int, directory: Path, scorer: str, extra: dict[str, str],
           target: float) -> Path:
    from tasks.symreg import SEPARATOR

    tables = problem_tables(name, PROGRAM_FILE, OBJECTIVES, target=target, weights=[1.0] * REGIONS, isolation="none", timeout=10.0,
                            style="continue", features={"length": ("scorer:length", [0, 200], 10)})
    tables["prompt"].update(set_head=SET_HEAD_FILE, separator=SEPARATOR)
    files = {PROGRAM_FILE: program_text(table, arity, initial_expression(table, arity)),
             SET_HEAD_FILE: set_head(table, arity), **extra}
    return write_problem(directory, tables, {**files, "score.py": scorer})


def write_instance_spec(name: str, data: Dataset, directory: Path, target: float = 1.0) -> Path:
    """The spec of a task instance (its points are rebuilt from formula, ranges and seed);
    `target`: its oracle best scalar (1: the formula is exact in every region)."""
    literal = json.dumps({"formula": data.formula, "ranges": [list(r) for r in data.ranges], "seed": data.seed})
    scorer = scorer_file(name, "tasks.symreg.spec:score_instance", {"DATA": literal})
    return _write(name, arrays(data), data.arity, Path(directory), scorer, {}, target)


def write_points_spec(name: str, table: Arrays, directory: Path) -> Path:
    """The spec of given points (`points.npz` beside the scorer holds them), up to a fit exact in
    every region (target 1; no oracle knows better)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    np.savez(directory / POINTS_FILE, **{key: getattr(table, key) for key in Arrays.__dataclass_fields__})
    scorer = scorer_file(name, "tasks.symreg.spec:score_points", {"SCORER": "__file__"})
    return _write(name, table, table.X_eval.shape[1], directory, scorer, {}, 1.0)


def score_block(text: str, table: Arrays, arity: int) -> dict[str, float]:
    """The scores of the expression in a program file's EVOLVE block."""
    from tasks.symreg import parse_answers

    block = block_of(text)
    try:
        (expression,) = parse_answers(block, arity, 1)
    except (ParseError, TemplateMismatch):
        return {**dict.fromkeys(OBJECTIVES, 0.0), "exact": 0.0, "valid": 0.0, "length": float(len(block.strip()))}
    function = compile_expression(expression, arity)
    scores = accuracy(function(table.X_eval), table)
    exact = matches(function(table.X_dense), table.y_dense)
    return {**{name: float(s) for name, s in zip(OBJECTIVES, scores)}, "exact": float(exact), "valid": 1.0,
            "length": float(len(expression))}


def score_instance(data: dict, path: str | Path) -> dict[str, float]:
    """`score_block` for a task instance's spec."""
    dataset = Dataset(data["formula"], tuple(tuple(r) for r in data["ranges"]), int(data["seed"]))
    return score_block(Path(path).read_text(), arrays(dataset), dataset.arity)


def load_points(path: str | Path) -> Arrays:
    with np.load(path) as stored:
        return Arrays(**{key: stored[key] for key in Arrays.__dataclass_fields__})


def score_points(scorer: str, path: str | Path) -> dict[str, float]:
    """`score_block` for a points spec (the points beside its `score.py`)."""
    table = load_points(Path(scorer).with_name(POINTS_FILE))
    return score_block(Path(path).read_text(), table, table.X_eval.shape[1])
