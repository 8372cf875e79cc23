"""Writing a problem spec for `evo run`: the TOML tables from plain values, and the files beside it.

    tables = problem_tables("nguyen7", "initial.py", ["r0", "r1"], target=1.0, features={"length": ("code_length", [0, 1000], 10)})
    scorer = scorer_file("nguyen7", "my_task.spec:score_program", {"DATA": json.dumps(data)})
    write_problem(directory, tables, {"initial.py": program, "score.py": scorer})
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SPEC_FILE = "problem.toml"


def block_of(text: str) -> str:
    """The text between the EVOLVE marker lines (the whole text if there are none)."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if "EVOLVE-BLOCK-START" in line]
    ends = [i for i, line in enumerate(lines) if "EVOLVE-BLOCK-END" in line]
    if not starts or not ends:
        return text
    return "".join(lines[starts[0] + 1 : ends[-1]])


def toml_text(tables: Mapping[str, Mapping[str, Any]]) -> str:
    """One `[table]` per key (dotted for sub-tables: "features.length"); values are strings,
    numbers, booleans or lists of them, written as JSON literals (valid TOML for these)."""
    lines = []
    for table, values in tables.items():
        lines += [f"[{table}]", *(f"{key} = {json.dumps(value)}" for key, value in values.items()), ""]
    return "\n".join(lines)


def scorer_file(about: str, function: str, constants: Mapping[str, str]) -> str:
    """The text of a spec's `score.py`: `evaluate(path)` calls `function` ("module:name") with
    the constants (name -> Python literal) and then the candidate's path."""
    module, _, name = function.partition(":")
    return "\n".join([f'"""Scorer for {about} (written by {module})."""', "", f"from {module} import {name}", "",
                      *(f"{key} = {value}" for key, value in constants.items()), "", "",
                      "def evaluate(path):", f"    return {name}({', '.join([*constants, 'path'])})", ""])


def write_problem(directory: Path, tables: Mapping[str, Mapping[str, Any]], files: Mapping[str, str]) -> Path:
    """Write `files` (name -> text) and the spec into `directory`; return the spec's path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    spec = directory / SPEC_FILE
    spec.write_text(toml_text(tables))
    return spec


def reachable(oracle_best: float) -> float:
    """A spec's `[search] target` for an instance whose best scalar is `oracle_best`: rounded
    down to six decimals, so the run's own scalar of the best program reaches it."""
    return math.floor(oracle_best * 1e6) / 1e6


def problem_tables(name: str, program: str, objectives: Sequence[str], *, target: float,
                   features: Mapping[str, tuple[str, Sequence[float], int]], isolation: str = "process",
                   timeout: float = 10.0, iterations: int = 200, style: str = "full",
                   weights: Sequence[float] | None = None) -> dict[str, dict[str, Any]]:
    """The tables of a task instance's spec: the program beside `score.py:evaluate`, MAP-Elites
    `features` (name -> (source, range, bins)), lexicase selection up to `target` (the
    instance's oracle best scalar, `Task.oracle_best`, through `reachable`)."""
    problem = {"name": name, "program": program, "scorer": "score.py:evaluate", "objectives": list(objectives)}
    if weights is not None:
        problem["weights"] = list(weights)
    tables = {"problem": problem, "sandbox": {"isolation": isolation, "timeout": timeout}}
    for feature, (source, bounds, bins) in features.items():
        tables[f"features.{feature}"] = {"source": source, "range": list(bounds), "bins": bins}
    tables["search"] = {"selection": "lexicase", "iterations": iterations, "target": reachable(target)}
    tables["prompt"] = {"style": style}
    return tables
