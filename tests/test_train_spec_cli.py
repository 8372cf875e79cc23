"""`evo train --spec` end to end on a non-maze spec (nguyen7) with a tiny model made here."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from evo import spec as specs
from evo.database import Database
from evo.policies.base import Completion
from training import checkpoint, tiny
from tests.evo_cli import refused
from training.spec_task import SpecTask

pytestmark = pytest.mark.slow
SPEC = "examples/nguyen7/problem.toml"


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("init")
    tok = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tok, context=2048), tok, path)
    return path


def evo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evo", "train", *args], capture_output=True, text=True, timeout=300)


def test_train_on_a_spec_from_a_run_and_resume(init_dir, tmp_path):
    run = tmp_path / "run"  # a program database as a search leaves it: two iterations
    spec = specs.load(SPEC)
    with SpecTask.open(spec, run, seed=0, prompts_per_step=2) as task:
        task.score_completions(task.instances("train", 2), [[Completion("none")], [Completion("none")]])
    out = tmp_path / "train"
    first = evo("--spec", SPEC, "--from-run", str(run), "--init", str(init_dir), "--out", str(out), "--steps", "1",
                "--prompts", "2", "--group", "2", "--max-new-tokens", "8", "--set", "prompt.style=continue", "--no-progress")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout.strip().splitlines()[-1])["algo"] == "vpo_front"  # the --spec default
    with Database.open(out) as db:  # the run's two iterations, then one step: 2 prompts x 2 proposals
        assert db.iteration == 4 and len(db.journal.candidates(since=2)) == 4
        assert all(c.code.startswith("import numpy") or c.status == "parse" for c in db.journal.candidates(since=2))
    resumed = evo("--out", str(out), "--resume", "--steps", "2", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert [r["step"] for r in checkpoint.read_metrics(out)] == [1, 2]
    with Database.open(out) as db:
        assert db.iteration == 6
    with Database.open(run) as db:
        assert db.iteration == 2  # the run itself is left as it was


def test_spec_flags_refuse_what_they_cannot_do(init_dir, tmp_path, capsys):
    common = ["--init", str(init_dir), "--out", str(tmp_path / "x"), "--prompts", "2", "--group", "2", "--max-new-tokens", "8"]
    assert "--spec" in refused(capsys, "train", "--task", "maze", "--from-run", str(tmp_path), *common)
    assert "not both" in refused(capsys, "train", "--task", "maze", "--spec", SPEC, *common)
    assert "set-answer prompt" in refused(capsys, "train", "--spec", SPEC, "--algo", "vpo", *common)
    assert "goal-answer prompt" in refused(capsys, "train", "--spec", SPEC, "--algo", "goal_grpo", *common)


ONE_STEP = ["--prompts", "2", "--group", "2", "--max-new-tokens", "8", "--set", "prompt.style=continue", "--no-progress"]


def a_run_of(spec_path: str, directory) -> None:
    """A program database as `evo run` leaves it (the initial program and one iteration)."""
    with SpecTask.open(specs.load(spec_path), directory, seed=0, prompts_per_step=1) as task:
        task.score_completions(task.instances("train", 1), [[Completion("none")]])


@pytest.fixture(scope="module")
def spec_run(init_dir, tmp_path_factory):
    """A spec training run of one step, made by the command (copy it before changing it)."""
    out = tmp_path_factory.mktemp("spec") / "train"
    done = evo("--spec", SPEC, "--init", str(init_dir), "--out", str(out), "--steps", "1", *ONE_STEP)
    assert done.returncode == 0, done.stderr
    return out


def test_an_edited_task_in_train_config_is_refused_on_resume(spec_run, tmp_path, capsys):
    out = tmp_path / "train"
    shutil.copytree(spec_run, out)
    config = json.loads((out / "train_config.json").read_text())
    (out / "train_config.json").write_text(json.dumps({**config, "task": "maze"}))
    line = refused(capsys, "train", "--out", str(out), "--resume", "--steps", "2", "--no-progress")
    assert "train_config.json" in line and "'maze'" in line and "spec" in line
    assert [r["step"] for r in checkpoint.read_metrics(out)] == [1]  # nothing trained


def test_a_damaged_spec_task_file_is_one_line(spec_run, tmp_path, capsys):
    out = tmp_path / "train"
    shutil.copytree(spec_run, out)
    source = json.loads((out / "spec_task.json").read_text())
    for damage in ({**source, "overrides": [1]}, {**source, "spec": 3}, {**source, "from_run": {}}, [source], {}):
        (out / "spec_task.json").write_text(json.dumps(damage))
        assert "spec_task.json" in refused(capsys, "train", "--out", str(out), "--resume", "--steps", "2", "--no-progress")


def test_a_start_refused_at_its_first_step_or_killed_is_started_again_by_the_same_command(init_dir, tmp_path, capsys):
    out = tmp_path / "train"
    common = ["--spec", SPEC, "--init", str(init_dir), "--out", str(out), "--steps", "1", *ONE_STEP]
    assert "--diversity-coef" in refused(capsys, "train", *common, "--diversity-coef", "0.5")  # after the database was made
    assert (out / "programs.sqlite").exists()
    line = refused(capsys, "train", "--out", str(out), "--resume", "--steps", "1", "--no-progress")
    assert "without --resume" in line and "before its first checkpoint" in line
    again = evo(*common)
    assert again.returncode == 0, again.stderr
    assert [r["step"] for r in checkpoint.read_metrics(out)] == [1]

    killed_out = tmp_path / "killed"
    args = ["--spec", SPEC, "--init", str(init_dir), "--out", str(killed_out), "--steps", "2", "--save-every", "2", *ONE_STEP]
    killed = subprocess.Popen([sys.executable, "-m", "evo", "train", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (killed_out / "programs.sqlite").exists() and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    assert not checkpoint.has_state(killed_out)  # killed in its first seconds
    restarted = evo(*args)
    assert restarted.returncode == 0, restarted.stderr
    assert [r["step"] for r in checkpoint.read_metrics(killed_out)] == [1, 2]


def test_a_from_run_that_is_refused_leaves_out_as_it_was(init_dir, tmp_path, capsys):
    other = tmp_path / "other"  # a run of another spec (other objectives)
    a_run_of("examples/circle_packing/problem.toml", other)
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "programs.sqlite").write_bytes(b"not a database" * 100)
    out = tmp_path / "train"
    common = ["--spec", SPEC, "--init", str(init_dir), "--out", str(out), "--steps", "1", *ONE_STEP]
    assert "other objectives" in refused(capsys, "train", *common, "--from-run", str(other))
    assert not out.exists()
    assert "not a readable program database" in refused(capsys, "train", *common, "--from-run", str(garbage))
    assert not out.exists()
    assert "K must be an integer >= 1" in refused(capsys, "train", *common, "--option", "K=0")
    assert not out.exists()
    good = tmp_path / "good"
    a_run_of(SPEC, good)
    done = evo(*common, "--from-run", str(good))
    assert done.returncode == 0, done.stderr
