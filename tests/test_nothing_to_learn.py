"""A training with nothing to learn says so in one line and stops: `evo train --spec` exits 1
after saving what it has; `evo run --train` searches on with the policy frozen and records why
(`evo show` says it). The spec's scorer refuses every program but the initial one; the policy
is the shipped maze-warmup checkpoint, whose routes parse."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import tasks
from training import checkpoint

pytestmark = pytest.mark.slow
REFUSING = '''from pathlib import Path

INITIAL = (Path(__file__).parent / "route.txt").read_text()


def evaluate(path):
    if Path(path).read_text() != INITIAL:
        raise RuntimeError("this scorer refuses every program but the initial one")
    return {"completion": 1.0, "gold": 0.0, "diamond": 0.0, "avoid_lava": 1.0}
'''


@pytest.fixture(scope="module")
def failing_spec(tmp_path_factory):
    task = tasks.get("maze")
    path = task.problem_spec(task.instances("test", 1)[0], tmp_path_factory.mktemp("failing"))
    (path.parent / "refuse.py").write_text(REFUSING)
    path.write_text(path.read_text().replace("score.py:evaluate", "refuse.py:evaluate"))
    return path


def evo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evo", *args], capture_output=True, text=True, timeout=300)


def test_evo_train_spec_stops_within_k_steps_and_keeps_what_it_has(failing_spec, tmp_path):
    out = tmp_path / "train"
    done = evo("train", "--spec", str(failing_spec), "--init", "maze-warmup", "--algo", "grpo", "--prompts", "2",
               "--group", "2", "--steps", "20", "--idle-steps", "2", "--no-progress", "--out", str(out))
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "nothing to learn in the last 2 training steps" in last and "training stopped at step 2" in last
    assert "Traceback" not in done.stderr
    assert [r["step"] for r in checkpoint.read_metrics(out)] == [1, 2] and checkpoint.has_state(out)
    assert all(r["valid"] == 0.0 for r in checkpoint.read_metrics(out))


def test_evo_run_train_freezes_the_policy_says_why_once_and_show_repeats_it(failing_spec, tmp_path):
    out = tmp_path / "run"
    done = evo("run", str(failing_spec), "--policy", "local:maze-warmup", "--train", "grpo", "--train-every", "1",
               "--train-option", "idle_steps=2", "--iterations", "8", "--batch", "1", "--depth", "1", "--quiet",
               "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("nothing to learn in the last 2 training steps") == 1
    assert "the search goes on with the policy frozen" in done.stderr and "8 iterations" in done.stdout
    metrics = (out / "online" / "metrics.jsonl").read_text().splitlines()
    assert len(metrics) == 2  # no step after the stop, though 8 iterations were searched
    stopped = json.loads((out / "online" / "stopped.json").read_text())
    assert stopped["step"] == 2
    shown = evo("show", str(out))
    assert shown.returncode == 0 and f"training stopped: {stopped['message']}" in shown.stdout
    from evo import report

    assert "Training stopped: nothing to learn" in report.write(out).read_text()
    resumed = evo("run", "--resume", str(out), "--iterations", "10", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert len((out / "online" / "metrics.jsonl").read_text().splitlines()) == 2  # stays frozen on resume
