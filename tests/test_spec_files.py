"""The problem-spec writer the task families share: TOML tables from plain values, scorer files."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

import tasks
from evo.scores import scalarize
from evo.spec import load
from tasks.spec_files import problem_tables, reachable, scorer_file, toml_text, write_problem


def test_toml_text_reads_back_as_the_same_values():
    tables = {"problem": {"name": 'a "quoted" näme\\', "objectives": ["x", "y"], "weights": [1.0, 2.5]},
              "features.length": {"source": "code_length", "range": [0, 100], "bins": 4},
              "search": {"target": 1.0, "iterations": 3, "flag": True}}
    parsed = tomllib.loads(toml_text(tables))
    assert parsed["problem"] == tables["problem"] and parsed["search"] == tables["search"]
    assert parsed["features"]["length"] == tables["features.length"]


def test_a_written_problem_loads_and_its_scorer_calls_the_function(tmp_path):
    tables = problem_tables("p", "initial.py", ["a", "b"], target=1.0, features={"a": ("objective:a", [0.0, 1.0], 3)}, iterations=7)
    scorer = scorer_file("p", "tasks.spec_files:problem_tables", {"NAME": repr("q")})
    spec = write_problem(tmp_path / "p", tables, {"initial.py": "x = 1\n", "score.py": scorer})
    problem = load(spec)
    assert problem.problem.objectives == ("a", "b") and problem.search.iterations == 7
    assert "return problem_tables(NAME, path)" in (tmp_path / "p" / "score.py").read_text()


@pytest.mark.parametrize("name, seed", [("maze-clusters", 11), ("maze", 0), ("maze-notes", 3), ("symreg", 0)])
def test_a_task_made_spec_targets_its_instances_oracle(tmp_path, name, seed):
    """The target is the oracle's best scalar, not 1.0 (0.35 on maze-clusters' test maze 11):
    reachable by the run's own scalar of the best vector, and nothing short of it reaches it."""
    task = tasks.get(name)
    instance = task.instances("test", 1, seed=seed)[0]
    spec = load(task.problem_spec(instance, tmp_path / name))
    oracle = task.oracle_best(instance)
    assert spec.search.target == reachable(oracle) and oracle - 1e-6 < spec.search.target <= oracle
    if hasattr(task, "oracle_vectors"):  # the mazes: every achievable vector, scored as the run scores it
        scalars = np.sort(np.unique(scalarize(task.oracle_vectors(instance), spec.problem.weights)))
        assert scalars[-1] >= spec.search.target > scalars[-2]


def test_reachable_rounds_down_to_six_decimals():
    assert reachable(0.35) == 0.35 and reachable(1.0) == 1.0
    assert reachable(2 / 3) == 0.666666 and reachable(0.7083333333333334) == 0.708333
