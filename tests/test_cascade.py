"""Cascade evaluation: `[problem] scorer = [stages]` with `cascade = [thresholds]`, in the real
sandbox (separate scorer and candidate processes), the stage reached stored in real SQLite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evo import spec as specs
from evo.database import Database
from evo.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[1]
SLOW = 1.5  # seconds the expensive stage takes
SCORER = f'''
import time
from evo.sandbox import candidate

def quick(path):
    v = candidate.load(path).value()
    return {{"a": v, "b": v, "feedback": "quick estimate"}}

def full(path):
    time.sleep({SLOW})
    v = candidate.load(path).value()
    return {{"a": v, "b": min(1.0, 2 * v)}}
'''


def write(tmp_path: Path, problem: str) -> Path:
    (tmp_path / "score.py").write_text(SCORER)
    (tmp_path / "initial.py").write_text("def value():\n    return 0.2\n")
    path = tmp_path / "problem.toml"
    path.write_text(f'[problem]\nprogram = "initial.py"\nobjectives = ["a", "b"]\n{problem}\n'
                    "[sandbox]\nworkers = 2\ntimeout = 20.0\n")
    return path


def candidate(value: float) -> str:
    return f"def value():\n    return {value}\n"


def test_weak_candidates_never_reach_the_slow_stage(tmp_path):
    spec = specs.load(write(tmp_path, 'scorer = ["score.py:quick", "score.py:full"]\ncascade = [0.45]'))
    values = [0.1, 0.9, 0.2, 0.8, 0.3, 0.7, 0.05, 0.6]  # half weak (scalar < 0.45), half strong
    with Sandbox.from_spec(spec) as sandbox:
        evaluations = [f.result() for f in [sandbox.submit(candidate(v)) for v in values]]
    with Database.open(tmp_path / "run", spec.database_config()) as db:
        stored = [db.add(candidate(v), e, island=0) for v, e in zip(values, evaluations)]
    strong = [v >= 0.45 for v in values]
    for value, evaluation, program, good in zip(values, evaluations, stored, strong):
        assert evaluation.ok, evaluation.failure
        assert evaluation.stage == program.stage == (2 if good else 1)
        if good:  # the full stage's vector, after its sleep
            assert evaluation.seconds >= SLOW and list(evaluation.scores) == [value, min(1.0, 2 * value)]
            assert evaluation.feedback == ""  # the last stage's feedback (it gave none)
        else:  # the quick estimate, without the sleep
            assert evaluation.seconds < SLOW and list(evaluation.scores) == [value, value]
            assert evaluation.feedback == "quick estimate"
    saved = sum(e.stage == 1 for e in evaluations)
    print(f"\ncascade: {saved} of {len(values)} expensive-stage evaluations saved "
          f"({sum(e.seconds for e in evaluations):.1f} s of evaluation instead of about {len(values) * SLOW:.1f} s)")
    assert saved == len(values) // 2


def test_a_failure_in_a_stage_is_the_evaluation_failure_at_that_stage(tmp_path):
    spec = specs.load(write(tmp_path, 'scorer = ["score.py:quick", "score.py:full"]\ncascade = [0.0]'))
    with Sandbox.from_spec(spec) as sandbox:
        raised = sandbox.evaluate("def value():\n    return 1 / 0\n")
        unparsable = sandbox.evaluate("def value(:\n")
    assert raised.failure.kind == "exception" and raised.stage == 1
    assert unparsable.failure.kind == "syntax" and unparsable.stage == 0  # no scorer ran


def test_a_single_scorer_reaches_stage_one(tmp_path):
    spec = specs.load(write(tmp_path, 'scorer = "score.py:quick"'))
    assert spec.problem.cascade == ()
    with Sandbox.from_spec(spec) as sandbox:
        evaluation = sandbox.evaluate(candidate(0.9))
    assert evaluation.ok and evaluation.stage == 1 and list(evaluation.scores) == [0.9, 0.9]


@pytest.mark.parametrize("problem, message", [
    ('scorer = ["score.py:quick", "score.py:full"]\ncascade = [0.2, 0.4]', "a list of 1 non-decreasing numbers"),
    ('scorer = ["score.py:quick", "score.py:full"]', "cascade: required key is missing"),
    ('scorer = ["score.py:quick", "score.py:full", "score.py:full"]\ncascade = [0.6, 0.4]', "non-decreasing"),
    ('scorer = "score.py:quick"\ncascade = [0.5]', "a list of 0 non-decreasing numbers"),
    ('scorer = []', "a non-empty list of them"),
    ('scorer = ["score.py:quick", "nothere.py:full"]\ncascade = [0.5]', "an existing scorer file"),
])
def test_bad_cascades_are_one_line_spec_errors(tmp_path, problem, message):
    path = write(tmp_path, problem)
    with pytest.raises(specs.SpecError, match=message) as error:
        specs.load(path)
    assert "\n" not in str(error.value)


def test_unknown_stage_function_is_one_line_exit_2(tmp_path):
    path = write(tmp_path, 'scorer = ["score.py:quick", "score.py:missing"]\ncascade = [0.5]')
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "evo", "check", str(path)], capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.returncode == 2, result.stderr
    assert "no function 'missing'" in result.stderr and len(result.stderr.strip().splitlines()) == 1



def test_check_reports_the_stage_and_the_feedback(tmp_path):
    path = write(tmp_path, 'scorer = ["score.py:quick", "score.py:full"]\ncascade = [0.45]')
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "evo", "check", "--json", str(path)], capture_output=True,
                            text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["stage"], report["feedback"], report["scores"]) == (1, "quick estimate", {"a": 0.2, "b": 0.2})
