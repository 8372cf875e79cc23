"""A directory received from elsewhere runs no code when loaded: a planted pickle in a `local:`
model directory or a TRL/DeepSpeed checkpoint is refused in one line naming the file, before
anything unpickles it; what TRL legitimately writes (rng state with numpy arrays, optimizer and
scheduler state) passes."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from evo.errors import UserError
from evo.policies import CHECKPOINTS, load
from evo.torch_files import code_in
from tests.evo_cli import refused
from training.config import TrainConfig

torch.set_num_threads(1)


class Planted:
    """Unpickled, it writes the marker file named by the environment's EVO_PLANTED."""

    def __reduce__(self):
        return (os.system, ('touch "$EVO_PLANTED"',))


@pytest.fixture
def marker(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "ran"
    monkeypatch.setenv("EVO_PLANTED", str(path))
    return path


def trl_checkpoint(directory: Path) -> Path:
    """What transformers' Trainer writes into checkpoint-N beside the weights."""
    directory.mkdir(parents=True)
    weight = torch.nn.Parameter(torch.zeros(3))
    optimizer = torch.optim.AdamW([weight])
    weight.sum().backward()
    optimizer.step()
    torch.save(optimizer.state_dict(), directory / "optimizer.pt")
    torch.save({"base_lrs": [1e-3], "last_epoch": 1}, directory / "scheduler.pt")
    torch.save({"python": random.getstate(), "numpy": np.random.get_state(), "cpu": torch.random.get_rng_state()},
               directory / "rng_state.pth")
    torch.save(Planted(), directory / "training_args.bin")  # written for people, never read back
    (directory / "trainer_state.json").write_text("{}")
    return directory


def test_what_trl_writes_passes_and_a_planted_file_is_named(tmp_path):
    checkpoint = trl_checkpoint(tmp_path / "checkpoint-2")
    assert code_in(checkpoint) is None
    (checkpoint / "global_step2").mkdir()
    torch.save({"module": {"w": torch.zeros(2)}, "x": Planted()}, checkpoint / "global_step2" / "mp_rank_00_model_states.pt")
    path, names = code_in(checkpoint)
    assert path.name == "mp_rank_00_model_states.pt" and names == ["posix.system"]
    (checkpoint / "global_step2" / "mp_rank_00_model_states.pt").write_bytes(b"\x80\x02junk")
    assert code_in(checkpoint)[1] == ["not a torch zip file"]


def test_a_deepspeed_tag_leading_out_of_the_checkpoint_is_refused(tmp_path):
    checkpoint = trl_checkpoint(tmp_path / "checkpoint-2")
    (checkpoint / "global_step2").mkdir()
    (checkpoint / "latest").write_text("global_step2")
    assert code_in(checkpoint) is None
    (checkpoint / "latest").write_text("../../elsewhere")
    assert code_in(checkpoint)[0].name == "latest"


def test_a_pickled_model_file_in_a_local_directory_is_one_line_and_runs_nothing(tmp_path, marker):
    model = tmp_path / "model"
    shutil.copytree(CHECKPOINTS / "maze-warmup", model)
    (model / "model.safetensors").unlink()
    torch.save({"transformer.wte.weight": Planted()}, model / "pytorch_model.bin")
    with pytest.raises(UserError, match=r"pytorch_model.bin: names posix.system, which loading it could run as code"):
        load(f"local:{model}", device="cpu")
    assert not marker.exists()


def test_a_trl_resume_with_a_planted_checkpoint_file_is_refused_unless_trusted(tmp_path, marker, capsys):
    pytest.importorskip("trl")
    out = tmp_path / "run"
    out.mkdir()
    TrainConfig(task="maze", algo="grpo", init=str(CHECKPOINTS / "maze-warmup"), out=str(out), steps=2, prompts=2,
                group=2, max_new_tokens=8, save_every=2, device="cpu").save(out)
    checkpoint = trl_checkpoint(out / "trl" / "checkpoint-2")
    torch.save(Planted(), checkpoint / "rng_state.pth")
    line = refused(capsys, "train", "--engine", "trl", "--resume", "--out", str(out), "--no-progress")
    assert f"{checkpoint / 'rng_state.pth'}: names posix.system" in line and "--trust-checkpoint" in line
    assert len(line.strip().splitlines()) == 1 and not marker.exists()
