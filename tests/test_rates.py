"""The default learning rate follows the model's size: a tiny model's 2e-4 never reaches a real model."""

from __future__ import annotations

import json

import pytest
from transformers import Qwen2Config

from evo.policies import CHECKPOINTS
from training import rates
from training.config import TrainConfig

QWEN_1_5B = dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                 num_attention_heads=12, num_key_value_heads=2, tie_word_embeddings=True)


def config(init, **overrides) -> TrainConfig:
    return TrainConfig(**{"task": "maze", "algo": "grpo", "init": str(init), "out": "unused", **overrides})


@pytest.fixture(scope="module")
def qwen_shape(tmp_path_factory):
    """A config.json of Qwen2.5-1.5B's shape (no weights: its size is counted on the meta device)."""
    path = tmp_path_factory.mktemp("qwen1.5b")
    Qwen2Config(**QWEN_1_5B).save_pretrained(path)
    return path


def test_recommended_by_size():
    assert rates.recommended(600_000, lora=False) == rates.recommended(600_000, lora=True) == 2e-4
    assert rates.recommended(1_500_000_000, lora=False) == 1e-6  # the paper's, TRL's and veRL's rate
    assert rates.recommended(1_500_000_000, lora=True) == 1e-5


def test_a_real_model_without_lr_gets_the_paper_rate(qwen_shape, capsys):
    count = rates.parameters_at(str(qwen_shape))
    assert 1.5e9 < count < 1.6e9
    assert config(qwen_shape).lr == 0  # chosen when the model is known
    assert rates.resolved(config(qwen_shape), count).lr == 1e-6
    assert rates.resolved(config(qwen_shape, lora_rank=16), count).lr == 1e-5
    assert capsys.readouterr().err == ""


def test_a_tiny_models_rate_on_a_real_model_is_kept_with_a_warning(qwen_shape, capsys):
    count = rates.parameters_at(str(qwen_shape))
    assert rates.resolved(config(qwen_shape, lr=2e-4), count).lr == 2e-4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--lr 0.0002 is 200x" in err and "5e-7 to 5e-6" in err
    rates.resolved(config(qwen_shape, lr=2e-6), count)
    assert capsys.readouterr().err == ""


def test_the_shipped_tiny_models_keep_their_rate(tmp_path):
    """Without --lr a shipped checkpoint trains at 2e-4, as before (train_config.json says so)."""
    from tasks import get
    from training.trainer import run

    init = CHECKPOINTS / "maze-warmup"
    assert rates.parameters_at(str(init)) < rates.TINY_PARAMETERS
    run(config(init, out=str(tmp_path), steps=1, prompts=1, group=2, max_new_tokens=16, device="cpu",
               idle_steps=0), task=get("maze"), progress=False)
    saved = json.loads((tmp_path / "train_config.json").read_text())
    assert saved["lr"] == 2e-4 and saved["weight_dtype"] == "float32" and saved["bf16"] is False


def test_engine_trl_resolves_the_same_rate(qwen_shape):
    pytest.importorskip("trl")
    from training.integrations.trl import resolved

    chosen = resolved(config(qwen_shape, device="cpu"))
    assert (chosen.lr, chosen.weight_dtype, chosen.bf16) == (1e-6, "float32", False)
    assert resolved(config(CHECKPOINTS / "maze-warmup", device="cpu")).lr == 2e-4
