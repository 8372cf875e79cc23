"""`evo train` and `evo pretrain` flags come from TrainConfig and SFTConfig: one default per setting."""

from __future__ import annotations

import dataclasses

import click
import pytest

from evo.commands import pretrain, train
from training.config import TrainConfig
from training.directory import build_config
from training.sft import SFTConfig


def default(field: dataclasses.Field):
    return field.default_factory() if field.default is dataclasses.MISSING else field.default


def parsed_defaults(command: click.Command, args: list[str]) -> dict:
    with command.make_context(command.name or "evo", args) as ctx:
        return dict(ctx.params)


def test_every_train_config_setting_has_a_flag_with_its_default():
    params = parsed_defaults(train.command, ["--out", "run"])
    for field in dataclasses.fields(TrainConfig):
        if field.name not in train.NOT_FLAGS:
            assert field.name in params, f"TrainConfig.{field.name} has no `evo train` flag"
            assert params[field.name] == default(field), field.name
    assert params["steps"] is None  # --resume keeps the run's own; a new run gets TrainConfig's


def test_pretrain_flags_default_to_sft_config():
    params = parsed_defaults(pretrain.command, ["--task", "maze"])
    flags = [f for f in dataclasses.fields(SFTConfig) if f.name in params]
    assert len(flags) >= 8
    for field in flags:
        assert params[field.name] == default(field), field.name


def test_a_new_train_run_gets_the_config_steps(tmp_path):
    config = build_config(tmp_path / "run", False, "init", None, {"task": "maze", "algo": "grpo"})
    assert config.steps == default(TrainConfig.__dataclass_fields__["steps"])


@pytest.mark.parametrize("flag, value", [("--rollouts", "nope"), ("--device", "tpu"), ("--algo", "nope")])
def test_choices_come_from_the_registries(flag, value):
    with pytest.raises(click.BadParameter):
        parsed_defaults(train.command, ["--out", "run", flag, value])
