"""Problem specs for symreg problems: the program defines `expression(x0, ..)` inside an
EVOLVE block; the scorer imports it (inside the sandbox) and scores it per region."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tasks.symreg.data import REGIONS, Dataset, arrays, recovered, region_scores
from tasks.symreg.problems import SymregProblem
from tasks.spec_files import problem_tables, scorer_file, write_problem

_PROGRAM = '''"""Symbolic regression, {name}: find y = f({args}) with {box}.
Score: accuracy 1 / (1 + RMSE / std(y)) in each of 8 regions of the input box.
Sample points (x -> y):
{points}
"""

from numpy import cos, exp, log, pi, sin, sqrt  # noqa: F401


# EVOLVE-BLOCK-START
def expression({args}):
    return {initial}
# EVOLVE-BLOCK-END
'''

def write_spec(problem: SymregProblem, data: Dataset, directory: Path) -> Path:
    table = arrays(data)
    args = ", ".join(f"x{i}" for i in range(data.arity))
    box = ", ".join(f"x{i} in [{lo:g}, {hi:g}]" for i, (lo, hi) in enumerate(data.ranges))
    points = "\n".join("    " + " ".join(f"{v:.4g}" for v in row) + f" -> {y:.4g}"
                       for row, y in zip(table.X_prompt[:10], table.y_prompt[:10]))
    program = _PROGRAM.format(name=problem.name, args=args, box=box, points=points,
                              initial=f"{np.mean(table.y_prompt):.4g} + 0.0 * x0")
    literal = json.dumps({"formula": data.formula, "ranges": [list(r) for r in data.ranges], "seed": data.seed})
    tables = problem_tables(problem.name, "initial.py", [f"region{r}" for r in range(REGIONS)],
                            features={"length": ("code_length", [0, 1000], 10)})
    scorer = scorer_file(problem.name, "tasks.symreg.spec:score_program", {"DATA": literal})
    return write_problem(directory, tables, {"initial.py": program, "score.py": scorer})


def _load(path: str | Path):
    from evo.sandbox import candidate  # (the program runs in a process of its own inside the sandbox)

    program = candidate.load(path)
    if "expression" not in dir(program):
        raise ValueError("the program must define a function `expression(x0, ...)`")
    return program.expression


def _predict(function, X: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        value = function(*(X[:, i] for i in range(X.shape[1])))
    return np.broadcast_to(np.asarray(value, dtype=np.float64), (len(X),))


def score_program(data: dict, path: str | Path) -> dict[str, float]:
    """Region scores of the program's `expression`, plus `exact` (1.0 when recovered)."""
    dataset = Dataset(data["formula"], tuple(tuple(r) for r in data["ranges"]), int(data["seed"]))
    function = _load(path)
    scores = region_scores(_predict(function, arrays(dataset).X_eval), dataset)
    exact = recovered(_predict(function, arrays(dataset).X_dense), dataset)
    return {**{f"region{r}": float(s) for r, s in enumerate(scores)}, "exact": float(exact)}
