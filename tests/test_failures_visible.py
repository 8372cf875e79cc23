"""Failures are visible: `evo show` (text, --failures, --json) and `evo report` list the
most common failure messages with counts and an example; the front lists distinct score
vectors with counts; coverage appears only when the run has features."""

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from evo import failures
from evo.database import Database
from evo.database.config import DatabaseConfig, FeatureConfig
from evo.database.records import Program
from evo.report import RunRecords, gather, render
from evo.scores import Evaluation

EVO = shutil.which("evo") or pytest.skip("the evo console script is not installed", allow_module_level=True)


def make_run(directory: Path, features: tuple = ()) -> None:
    with Database.open(directory, DatabaseConfig(("a", "b"), features=features, minimize=("b",))) as db:
        db.add_initial("x = 0\n", Evaluation(np.array([0.5, -2.0])))
        for i in range(3):  # three programs with one vector
            db.add(f"x = {i + 1}\n", Evaluation(np.array([0.9, -1.0])), island=0, parents=(1,))
        for line in (12, 14, 19):  # one message, numbers aside
            db.add(f"y = {line}\n", Evaluation.failed("exception", f"IndexError: list index out of range (at candidate.py:{line})",
                                                      output=f"Traceback\n\x1b[31mboom {line}\n"), island=0, parents=(1,))
        db.add("z = 1\n", Evaluation.failed("timeout", "exceeded the 10 s wall-clock limit"), island=0, parents=(1,))
        db.end_iteration()


def evo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([EVO, *args], capture_output=True, text=True, timeout=120)


def test_common_messages_group_by_kind_and_message_numbers_aside():
    programs = [Program(i, "", "h", "n", 0, 0, None, None, failure_kind="exception", failure_message=f"E at :{i}",
                        feedback="out\x07" if i == 3 else "") for i in (3, 4, 5)]
    programs += [Program(6, "", "h", "n", 0, 0, None, None, failure_kind="killed", failure_message="E at :6"),
                 Program(7, "", "h", "n", 0, 0, np.array([1.0]), 1.0)]
    found = failures.common(programs)
    assert [(f["kind"], f["count"], f["example"]) for f in found] == [("exception", 3, 3), ("killed", 1, 6)]
    assert found[0]["message"] == "E at :3" and found[0]["output"] == "out\\x07"


def test_show_lists_failure_messages_and_distinct_vectors(tmp_path):
    make_run(tmp_path / "run")
    data = json.loads(evo("show", str(tmp_path / "run"), "--json").stdout)
    assert data["coverage"] is None
    assert [(e["count"], e["scores"]) for e in data["pareto"]] == [(3, {"a": 0.9, "b": 1.0})]  # b: its real value
    messages = data["failure_messages"]
    assert [(m["kind"], m["count"]) for m in messages] == [("exception", 3), ("timeout", 1)]
    assert "\x1b" not in json.dumps(messages) and "\\x1b[31mboom 12" in messages[0]["output"]
    text = evo("show", str(tmp_path / "run"))
    assert text.returncode == 0, text.stderr
    assert "coverage" not in text.stdout and "1 distinct score vectors (3 programs)" in text.stdout
    assert "and 2 more with the same scores" in text.stdout
    assert "3 x exception: IndexError: list index out of range (at candidate.py:12) (e.g. #8)" in text.stdout
    full = evo("show", str(tmp_path / "run"), "--failures")
    assert "| \\x1b[31mboom 12" in full.stdout and "\x1b" not in full.stdout


def test_coverage_is_shown_when_the_run_has_features(tmp_path):
    make_run(tmp_path / "run", (FeatureConfig("len", "code_length", (0, 100), 4),))
    data = json.loads(evo("show", str(tmp_path / "run"), "--json").stdout)
    assert 0 < data["coverage"] <= 1
    assert "coverage 25%" in evo("show", str(tmp_path / "run")).stdout


def test_the_report_says_why_children_fail(tmp_path):
    make_run(tmp_path / "run")
    page = gather(RunRecords.read(tmp_path / "run"))
    assert [(w["count"], w["example"]) for w in page["why"]] == [(3, 8), (1, 11)]
    assert page["best"]["scores"] == {"a": 0.9, "b": 1.0}
    html = render(page)
    assert "Why children fail" in html and "IndexError: list index out of range" in html and "\x1b" not in html
