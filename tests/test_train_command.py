"""`evo train` end to end in a real subprocess: run, resume, and one-line user errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from training import tiny
from training import checkpoint

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("init")
    tok = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tok, context=512), tok, path)
    return path


def evo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evo", "train", *args], capture_output=True, text=True, timeout=300)


def test_train_resume_and_errors(init_dir, tmp_path):
    out = tmp_path / "run"
    common = ["--task", "maze", "--init", str(init_dir), "--out", str(out), "--prompts", "2", "--group", "2",
              "--max-new-tokens", "8", "--no-progress"]
    first = evo(*common, "--algo", "vpo", "--steps", "1", "--option", "K=10", "--option", "sobol=True")
    assert first.returncode == 0, first.stderr
    (line,) = first.stdout.splitlines()  # the JSON summary alone (DeepSpeed's accelerator note went to stderr)
    assert json.loads(line)["algo"] == "vpo"
    again = evo(*common, "--algo", "vpo", "--steps", "2")
    assert again.returncode == 2 and "--resume" in again.stderr and "Traceback" not in again.stderr
    resumed = evo("--out", str(out), "--resume", "--steps", "2", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert [r["step"] for r in checkpoint.read_metrics(out)] == [1, 2]
    moved = tmp_path / "moved"  # a run copied elsewhere (e.g. committed to resume later) resumes where it now is
    shutil.copytree(out, moved)
    assert evo("--out", str(moved), "--resume", "--steps", "3", "--no-progress").returncode == 0
    assert [r["step"] for r in checkpoint.read_metrics(moved)] == [1, 2, 3]
    assert [r["step"] for r in checkpoint.read_metrics(out)] == [1, 2]

    nothing = evo("--out", str(tmp_path / "empty"), "--resume")
    assert nothing.returncode == 2 and "no trainer checkpoint" in nothing.stderr
    bad = evo(*common[:-3], "--out", str(tmp_path / "bad"), "--algo", "grpo", "--steps", "1", "--option", "nope=1")
    assert bad.returncode == 2 and "bad --option" in bad.stderr and "Traceback" not in bad.stderr
    missing = evo("--task", "maze", "--init", str(tmp_path), "--out", str(tmp_path / "x"))
    assert missing.returncode == 2 and "config.json" in missing.stderr


def test_init_takes_a_shipped_checkpoints_name(tmp_path):
    from evo.policies import CHECKPOINTS
    from training.config import TrainConfig

    out = tmp_path / "run"
    done = evo("--task", "maze", "--init", "maze-warmup", "--out", str(out), "--prompts", "2", "--group", "2",
               "--max-new-tokens", "8", "--steps", "1", "--no-progress")
    assert done.returncode == 0, done.stderr
    assert TrainConfig.load(out).init == str(CHECKPOINTS / "maze-warmup")
    unknown = evo("--task", "maze", "--init", "maze-warmpu", "--out", str(tmp_path / "other"))
    assert unknown.returncode == 2 and "no shipped checkpoint of that name (shipped: " in unknown.stderr


def test_list_algos_says_each_estimators_prompt():
    from training.advantages import REGISTRY

    listed = evo("--list-algos")
    assert listed.returncode == 0, listed.stderr
    pairs = dict(line.split() for line in listed.stdout.strip().splitlines())
    assert pairs == {name: entry.prompt for name, entry in REGISTRY.items()}
    assert pairs["vpo"] == "set" and pairs["grpo"] == "single" and pairs["goal_grpo"] == "goal"


def test_option_flags_train_and_are_saved(init_dir, tmp_path):
    flags = ["--algo", "goal_grpo", "--diversity-coef", "1.5", "--entropy-coef", "0.01", "--eps-high", "0.28",
             "--ppo-epochs", "2"]
    out = tmp_path / "run"
    done = evo("--task", "maze", "--init", str(init_dir), "--out", str(out), "--prompts", "2", "--group", "2",
               "--max-new-tokens", "8", "--steps", "1", "--no-progress", *flags)
    assert done.returncode == 0, done.stderr
    saved = json.loads((out / "train_config.json").read_text())
    for flag, value in zip(flags[::2], flags[1::2]):
        key = flag.removeprefix("--").replace("-", "_")
        assert str(saved[key]) == value
    assert [r["step"] for r in checkpoint.read_metrics(out)] == [1]


def test_option_flags_refuse_what_they_cannot_do(init_dir, tmp_path):
    common = ["--task", "maze", "--init", str(init_dir), "--prompts", "2", "--group", "2", "--max-new-tokens", "8"]
    sets = evo(*common, "--out", str(tmp_path / "a"), "--algo", "vpo", "--diversity-coef", "1")
    assert sets.returncode == 2 and "single-answer" in sets.stderr and "Traceback" not in sets.stderr
    negative = evo(*common, "--out", str(tmp_path / "b"), "--entropy-coef", "-1")
    assert negative.returncode == 2 and "--entropy-coef" in negative.stderr
    goal = evo(*common, "--task", "symreg", "--out", str(tmp_path / "c"), "--algo", "goal_grpo")
    assert goal.returncode == 2 and "prompt_with_weights" in goal.stderr and "Traceback" not in goal.stderr
