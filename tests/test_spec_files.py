"""The problem-spec writer the task families share: TOML tables from plain values, scorer files."""

from __future__ import annotations

import tomllib

from evo.spec import load
from tasks.spec_files import problem_tables, scorer_file, toml_text, write_problem


def test_toml_text_reads_back_as_the_same_values():
    tables = {"problem": {"name": 'a "quoted" näme\\', "objectives": ["x", "y"], "weights": [1.0, 2.5]},
              "features.length": {"source": "code_length", "range": [0, 100], "bins": 4},
              "search": {"target": 1.0, "iterations": 3, "flag": True}}
    parsed = tomllib.loads(toml_text(tables))
    assert parsed["problem"] == tables["problem"] and parsed["search"] == tables["search"]
    assert parsed["features"]["length"] == tables["features.length"]


def test_a_written_problem_loads_and_its_scorer_calls_the_function(tmp_path):
    tables = problem_tables("p", "initial.py", ["a", "b"], features={"a": ("objective:a", [0.0, 1.0], 3)}, iterations=7)
    scorer = scorer_file("p", "tasks.spec_files:problem_tables", {"NAME": repr("q")})
    spec = write_problem(tmp_path / "p", tables, {"initial.py": "x = 1\n", "score.py": scorer})
    problem = load(spec)
    assert problem.problem.objectives == ("a", "b") and problem.search.iterations == 7
    assert "return problem_tables(NAME, path)" in (tmp_path / "p" / "score.py").read_text()
