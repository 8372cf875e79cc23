"""`evo train --engine trl` and `--rollouts vllm` from the command line: a real run, and the
user errors as one line with exit 2."""

from __future__ import annotations

import json

import pytest

from evo.commands import train as train_command
from training import config as train_config
from training import models
from training.integrations import trl as trl_integration
from tests.test_train_command import evo, init_dir  # noqa: F401  (init_dir: a fixture, used by name)

pytestmark = pytest.mark.slow


def test_engine_trl_trains_and_usage_errors_are_one_line(init_dir, tmp_path):
    common = ["--task", "maze", "--init", str(init_dir), "--prompts", "2", "--group", "2", "--max-new-tokens", "8",
              "--steps", "1", "--no-progress"]
    done = evo(*common, "--engine", "trl", "--option", "K=10", "--out", str(tmp_path / "trl"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["algo"] == "vpo"
    assert (tmp_path / "trl" / "config.json").exists() and (tmp_path / "trl" / "metrics.jsonl").exists()
    for args, message in ((("--engine", "trl", "--algo", "maxk"), "--engine trl runs"),
                          (("--use-vllm",), "--use-vllm is for --engine trl"),
                          (("--engine", "trl", "--diversity-coef", "0.1"), "--diversity-coef is the project's"),
                          (("--rollouts", "vllm"), "needs vLLM installed"),
                          (("--rollouts", "vllm", "--vllm-sleep"), "vLLM's sleep mode needs a CUDA GPU"),  # this CPU
                          (("--chat",), "has none; use --no-chat")):
        bad = evo(*common, *args, "--out", str(tmp_path / "bad"))
        assert bad.returncode == 2 and "Traceback" not in bad.stderr, (args, bad.stderr[-1500:])
        assert message in bad.stderr.strip().splitlines()[-1]


def test_flag_choices_come_from_the_owners():
    params = {p.name: p for p in train_command.command.params}
    assert tuple(params["rollouts"].type.choices) == train_config.ROLLOUTS
    assert tuple(params["device"].type.choices) == models.DEVICES
    assert set(trl_integration.ALGOS) <= set(params["algo"].type.choices)
