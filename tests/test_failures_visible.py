"""Failures are visible: `evo show` (text, --failures, --json) and `evo report` list the
most common failure messages with counts and an example; the front lists distinct score
vectors with counts; coverage appears only when the run has features."""

import json
import shutil
import subprocess
import textwrap
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


# An OpenEvolve-style evaluator that runs the program in a temporary script with a time
# limit and reports a failure as an EvaluationResult with the traceback among its artifacts.
# Its program passes with delay() == 0; every child of `mutate:` moves the constant and hangs.
TIMEOUTS = {
    "initial.py": """
        # EVOLVE-BLOCK-START
        def delay():
            return 0.0
        # EVOLVE-BLOCK-END
        """,
    "evaluator.py": """
        import os, subprocess, sys, tempfile, traceback
        from dataclasses import dataclass, field

        @dataclass
        class EvaluationResult:  # the shape of OpenEvolve's, duck-typed
            metrics: dict
            artifacts: dict = field(default_factory=dict)

        def evaluate(program_path):
            with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
                script.write("import importlib.util, time\\n"
                             f"spec = importlib.util.spec_from_file_location('program', {program_path!r})\\n"
                             "program = importlib.util.module_from_spec(spec)\\n"
                             "spec.loader.exec_module(program)\\n"
                             "time.sleep(0 if program.delay() == 0 else 60)\\n")
            try:
                subprocess.run([sys.executable, script.name], timeout=1.0, check=True, capture_output=True)
                return {"score": 1.0}
            except Exception as error:
                return EvaluationResult(metrics={"score": 0.0, "error": str(error)},
                                        artifacts={"traceback": traceback.format_exc()})
            finally:
                os.unlink(script.name)
        """,
    "problem.toml": """
        [problem]
        program = "initial.py"
        scorer = "evaluator.py:evaluate"
        objectives = ["score"]

        [search]
        islands = 1
        samples_per_prompt = 4
        iterations = 3
        """,
}


@pytest.fixture(scope="module")
def timeouts_run(tmp_path_factory) -> Path:
    """A real `evo run --policy mutate:` whose children all time out in the evaluator."""
    directory = tmp_path_factory.mktemp("timeouts")
    for name, text in TIMEOUTS.items():
        (directory / name).write_text(textwrap.dedent(text).lstrip())
    done = evo("run", str(directory / "problem.toml"), "--policy", "mutate:", "--out", str(directory / "run"), "--quiet")
    assert done.returncode == 0, done.stderr
    return directory / "run"


def test_folders_and_temp_names_are_masked_but_file_names_are_not():
    timeout = "Command '['/usr/bin/python3', '{}']' timed out after 1.0 seconds"
    assert (failures.message_key("exception", timeout.format("/tmp/tmpk2x_9a0q.py"))
            == failures.message_key("exception", timeout.format("/var/tmp/evo-3/eval-ab_12cd/tmp81bzq3wd.py")))
    missing = "FileNotFoundError: No such file or directory: '/tmp/eval-{}/{}'"
    assert (failures.message_key("exception", missing.format("x81bzq3w", "data.csv"))
            == failures.message_key("exception", missing.format("ab_12cdq", "data.csv")))
    assert (failures.message_key("exception", missing.format("x81bzq3w", "data.csv"))
            != failures.message_key("exception", missing.format("x81bzq3w", "labels.csv")))


@pytest.mark.slow
def test_an_evaluators_timeouts_in_different_temp_files_are_one_group(timeouts_run):
    data = json.loads(evo("show", str(timeouts_run), "--json").stdout)
    assert data["failures"] >= 6  # 3 iterations x 4 children, but for a duplicate or two
    (group,) = data["failure_messages"]
    assert (group["kind"], group["count"]) == ("exception", data["failures"])
    assert group["message"].startswith("the scorer reported: Command") and "timed out after 1.0 seconds" in group["message"]
    assert f"{data['failures']} x exception: the scorer reported" in evo("show", str(timeouts_run)).stdout


@pytest.mark.slow
def test_a_failures_artifacts_are_kept_and_shown(timeouts_run):
    with Database.open(timeouts_run, read_only=True) as db:
        failed = [p for p in db.evaluated(ok_only=False) if not p.ok]
    assert failed and all("traceback: Traceback (most recent call last):" in p.feedback for p in failed)
    assert all(p.feedback.rstrip().endswith("timed out after 1.0 seconds") for p in failed)
    full = evo("show", str(timeouts_run), "--failures").stdout
    assert "| subprocess.TimeoutExpired: Command" in full


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
