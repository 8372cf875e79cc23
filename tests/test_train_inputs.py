"""Training inputs from anywhere: a trainer state never runs code, a save is all or nothing,
and corrupt weights, states, metrics and configs or bad numbers are one line, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from evo.errors import UserError
from training import checkpoint, models, tiny
from training.config import CONFIG_FILE, TrainConfig

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("init")
    tok = tiny.char_tokenizer()
    torch.manual_seed(0)
    tiny.save(tiny.new_model("nano", "llama", tok, context=512), tok, path)
    return path


def saved_run(init_dir: Path, out: Path, step: int = 1, lr: float = 1e-3) -> tuple:
    """A run directory as the trainer leaves it after `step` steps (weights moved by one step)."""
    model, tokenizer = models.load(str(init_dir))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for _ in range(step):
        model(torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    out.mkdir(parents=True, exist_ok=True)
    checkpoint.save(out, model, tokenizer, optimizer, step)
    TrainConfig(task="maze", algo="vpo", init=str(init_dir), out=str(out), steps=step, prompts=2, group=2,
                max_new_tokens=8).save(out)
    for s in range(1, step + 1):
        checkpoint.append_metrics(out, {"step": s, "scalar": 0.0})
    return model, tokenizer, optimizer


class Payload:
    """What an attacker pickles: unpickling it calls Path.touch(marker)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_trainer_state_is_loaded_without_unpickling_code(init_dir, tmp_path):
    saved_run(init_dir, tmp_path)
    state = checkpoint.load_state(tmp_path)  # the real state loads with weights_only=True
    assert state["step"] == 1 and state["optimizer"]["state"]
    marker = tmp_path / "pwned"
    torch.save({"optimizer": {}, "step": 1, "x": Payload(marker)}, tmp_path / checkpoint.STATE_FILE)
    with pytest.raises(UserError, match="not a readable trainer state"):
        checkpoint.load_state(tmp_path)
    assert not marker.exists()


def test_a_truncated_or_foreign_state_is_one_line(init_dir, tmp_path):
    saved_run(init_dir, tmp_path)
    path = tmp_path / checkpoint.STATE_FILE
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(UserError, match="not a readable trainer state"):
        checkpoint.load_state(tmp_path)
    torch.save([1, 2, 3], path)
    with pytest.raises(UserError, match="not a trainer state"):
        checkpoint.load_state(tmp_path)


class Killed(BaseException):
    """Stands for a SIGKILL at one point of a save (nothing after it runs)."""


@pytest.mark.parametrize("moves", [0, 1, 3])
def test_a_save_killed_between_its_file_moves_resumes_one_steps_weights_and_state(init_dir, tmp_path, monkeypatch, moves):
    saved_run(init_dir, tmp_path, step=1)
    model, tokenizer = models.load(str(tmp_path))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    optimizer.load_state_dict(checkpoint.load_state(tmp_path)["optimizer"])
    model(torch.tensor([[4, 5, 6]]), labels=torch.tensor([[4, 5, 6]])).loss.backward()
    optimizer.step()
    wanted = {k: v.clone() for k, v in model.state_dict().items()}
    real, done = os.replace, []

    def replace_then_die(src, dst):
        moving = Path(src).parent.name == checkpoint.STAGING and Path(dst).parent == tmp_path
        if moving and len(done) == moves:  # marked complete, `moves` files moved, then the kill
            raise Killed
        done.extend([dst] if moving else [])
        real(src, dst)

    monkeypatch.setattr(checkpoint.os, "replace", replace_then_die)
    with pytest.raises(Killed):
        checkpoint.save(tmp_path, model, tokenizer, optimizer, 2)
    monkeypatch.setattr(checkpoint.os, "replace", real)
    checkpoint.recover(tmp_path)  # what a resume does first
    assert not (tmp_path / checkpoint.STAGING).exists()
    assert checkpoint.load_state(tmp_path)["step"] == 2
    loaded = models.load(str(tmp_path))[0].state_dict()
    assert all(torch.equal(loaded[k], wanted[k]) for k in wanted)


def test_a_save_killed_before_its_mark_is_dropped(init_dir, tmp_path):
    saved_run(init_dir, tmp_path, step=1)
    before = (tmp_path / "model.safetensors").read_bytes()
    staging = tmp_path / checkpoint.STAGING
    staging.mkdir()
    (staging / "model.safetensors").write_bytes(b"half a file")
    checkpoint.recover(tmp_path)
    assert not staging.exists() and (tmp_path / "model.safetensors").read_bytes() == before
    assert checkpoint.load_state(tmp_path)["step"] == 1


def test_a_partial_last_metrics_line_is_dropped_and_a_bad_middle_line_is_one_line(tmp_path):
    (tmp_path / checkpoint.METRICS_FILE).write_text('{"step": 1, "scalar": 0.5}\n{"step": 2, "sca')
    assert checkpoint.read_metrics(tmp_path) == [{"step": 1, "scalar": 0.5}]
    checkpoint.truncate_metrics(tmp_path, 1)
    checkpoint.append_metrics(tmp_path, {"step": 2, "scalar": 0.25})
    assert [r["step"] for r in checkpoint.read_metrics(tmp_path)] == [1, 2]
    (tmp_path / checkpoint.METRICS_FILE).write_text('{"step": 1}\ngarbage\n{"step": 3}\n')
    with pytest.raises(UserError, match="line 2"):
        checkpoint.read_metrics(tmp_path)


@pytest.mark.parametrize("settings, wanted", [
    (dict(lr=float("nan")), "lr"), (dict(lr=float("inf")), "lr"), (dict(lr=-1.0), "lr"),
    (dict(eps_high=float("nan")), "eps_high"), (dict(kl_coef=float("nan")), "kl_coef"),
    (dict(eps_low=-1.0), "eps_low"), (dict(eps_low=1.0), "eps_low"), (dict(max_grad_norm=0.0), "max_grad_norm"),
    (dict(answers=0), "answers must be >= 1"), (dict(answers=65), "answers must be <= 64"),
])
def test_bad_numbers_are_refused_before_training(settings, wanted):
    with pytest.raises(ValueError, match=wanted):
        TrainConfig(task="maze", algo="vpo", init="x", out="y", **settings)


def test_clip_bounds_that_cannot_bind_are_refused(init_dir, tmp_path):
    from training.directory import build_config

    def build(**settings):
        return build_config(tmp_path / "run", False, str(init_dir), 2, {"task": "maze", "algo": "grpo", **settings})

    for settings in (dict(eps_high=0.28), dict(eps_low=0.1), dict(eps_high=0.28, ppo_epochs=1)):
        with pytest.raises(UserError, match="--ppo-epochs 2 or more"):
            build(**settings)  # one on-policy update per step: the ratio is 1, the clip changes nothing
    assert build(eps_high=0.28, ppo_epochs=2).eps_high == 0.28
    assert build().ppo_epochs == 1  # the defaults are fine


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"task": "maze"}', '{"task": "maze", "algo": "vpo", '
                                  '"init": "x", "out": "y", "lr": "fast"}'])
def test_a_garbage_train_config_is_one_line(tmp_path, text):
    (tmp_path / CONFIG_FILE).write_text(text)
    with pytest.raises(UserError, match="not a valid training config"):
        TrainConfig.load(tmp_path)


def evo(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evo", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def one_line_error(result: subprocess.CompletedProcess, wanted: str) -> None:
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]  # (after transformers' own progress bars, if any)
    assert last.startswith("error:") and wanted in last, result.stderr[-2000:]


@pytest.mark.slow
def test_the_commands_say_one_line_for_bad_training_inputs(init_dir, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for item in init_dir.iterdir():
        (broken / item.name).write_bytes(item.read_bytes())
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    common = ["--task", "maze", "--prompts", "2", "--group", "2", "--max-new-tokens", "8", "--no-progress"]
    one_line_error(evo("train", *common, "--init", str(broken), "--out", str(tmp_path / "t")), "not a readable weights file")
    one_line_error(evo("train", *common, "--init", str(init_dir), "--out", str(tmp_path / "n"), "--lr", "nan"), "lr")
    one_line_error(evo("train", *common, "--init", str(init_dir), "--out", str(tmp_path / "c"), "--eps-high", "0.28"),
                   "--ppo-epochs 2 or more")

    run = tmp_path / "run"
    saved_run(init_dir, run)
    one_line_error(evo("train", "--out", str(run), "--resume", "--steps", "2", "--algo", "grpo"), "--algo 'grpo' differs")
    (run / checkpoint.STATE_FILE).write_bytes((run / checkpoint.STATE_FILE).read_bytes()[:200])
    one_line_error(evo("train", "--out", str(run), "--resume", "--steps", "3"), "not a readable trainer state")
    (run / CONFIG_FILE).write_text("garbage")
    one_line_error(evo("train", "--out", str(run), "--resume", "--steps", "3"), "not a valid training config")
