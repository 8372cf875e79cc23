"""`evo train --spec` end to end on a non-maze spec (nguyen7) with a tiny model made here."""

from __future__ import annotations

import json
import subprocess
import sys

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
    assert json.loads(first.stdout.strip().splitlines()[-1])["algo"] == "vpo_archive"  # the --spec default
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
