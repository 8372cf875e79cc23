"""`evo show DIR --program N` and `evo show DIR --failures` on real runs (one made by
evo.api.evolve with `mutate:` and a minimized objective, one by `evo run` on nguyen7),
in a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evo.api import evolve
from tests.test_api import score, target  # the function evolved and its scorer (fit, error_size)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("show") / "run"
    with evolve(target, score, "mutate:", iterations=6, seed=3, minimize=["error_size"], directory=directory,
                islands=1, samples_per_prompt=2):
        pass
    return directory


def show(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evo", "show", *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def test_program_n_prints_its_scores_and_lineage(run_dir):
    from evo.database import Database

    with Database.open(run_dir, read_only=True) as db:
        child = max((p for p in db.evaluated() if p.parents), key=lambda p: p.id)
        parent = db.get(child.parents[0])
    shown = show(run_dir, "--program", child.id)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(f"#{child.id}: iteration {child.iteration}, island 0, policy mutate:")
    assert lines[0].endswith(f"parents #{parent.id}")
    fit, error = child.scores  # error_size is minimized: stored negated, shown as the scorer reported it
    assert lines[1] == f"scalar {child.scalar:.6g} (fit={fit:.6g}, error_size={-error:.6g})" and error < 0
    assert lines[2].startswith("lineage (first parents, oldest first): #1 -> ")
    assert lines[2].endswith(f"#{parent.id} -> #{child.id}")
    assert child.code.rstrip() in shown.stdout
    data = json.loads(show(run_dir, "--program", child.id, "--json").stdout)
    assert data["scores"] == {"fit": fit, "error_size": -error} and data["parents"] == [parent.id]
    assert data["lineage"][0] == 1 and data["lineage"][-2:] == [parent.id, child.id]


def test_an_unknown_program_is_one_line(run_dir):
    missing = show(run_dir, "--program", 999)
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.startswith(f"error: {run_dir}: no program #999 in this run (its programs are #1 to #")
    assert len(missing.stderr.splitlines()) == 1


def test_failures_on_a_run_without_failures_says_so(nguyen7_run):
    assert json.loads(show(nguyen7_run, "--json").stdout)["failures"] == 0  # nguyen7's scorer scores any f
    full = show(nguyen7_run, "--failures")
    assert full.returncode == 0
    assert full.stdout.splitlines()[-1] == "why children fail: no failures (every evaluated program returned scores)"
    assert "why children fail" not in show(nguyen7_run).stdout  # the summary stays short


def test_an_edited_failure_kind_and_origin_reach_the_terminal_escaped():
    """A run directory received from elsewhere can hold any text: `--program N` escapes the
    failure kind and the copy's origin as it escapes messages (no raw escape byte is printed)."""
    from evo.report.text import program_lines

    view = {"id": 3, "iteration": 1, "island": 0, "policy": "p", "source": 2, "origin": "migrant\x1b[2J",
            "parents": [2], "failure": {"kind": "timeout\x1b]0;owned\x07", "message": "m"}, "lineage": [1, 2, 3],
            "code": "x = 1\n", "feedback": ""}
    text = "\n".join(program_lines(view))
    assert "\x1b" not in text and "\x07" not in text
    assert "migrant" in text and "timeout" in text
