"""`--engine trl` under the shipped FSDP2 accelerate config, two CPU processes (gloo): a bf16
checkpoint trains with float32 masters, the export gathers the shards and writes bf16 weights
the size of the input, and the reloaded export generates what the trained weights do. The
shipped configs parse as accelerate configs of the kind their names say."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from evo.errors import UserError
from evo.policies import CHECKPOINTS

pytest.importorskip("trl")
ROOT = Path(__file__).resolve().parents[1]


def test_the_shipped_accelerate_configs_say_what_their_names_say():
    from accelerate.commands.config.config_args import load_config_from_file

    from training.integrations.trl import LAUNCH_CONFIGS, config_file

    configs = {name: load_config_from_file(str(config_file(name))) for name in LAUNCH_CONFIGS}
    assert {n: str(c.distributed_type).split(".")[-1] for n, c in configs.items()} == {
        "ddp": "MULTI_GPU", "zero2": "DEEPSPEED", "zero3": "DEEPSPEED", "fsdp2": "FSDP"}
    assert configs["zero2"].deepspeed_config["zero_stage"] == 2
    assert configs["zero3"].deepspeed_config["zero_stage"] == 3 and configs["zero3"].deepspeed_config["zero3_save_16bit_model"]
    fsdp = configs["fsdp2"].fsdp_config
    assert fsdp["fsdp_version"] == 2 and fsdp["fsdp_state_dict_type"] == "FULL_STATE_DICT"
    assert all(str(c.mixed_precision).split(".")[-1].lower() == "no" for c in configs.values())  # the precision plan decides
    with pytest.raises(UserError, match="shipped: ddp, zero2, zero3, fsdp2"):
        config_file("zero1")
    named = set(re.findall(r"accelerate_configs/(\w+)\.yaml", (ROOT / "docs" / "training.md").read_text()))
    assert named and named <= set(LAUNCH_CONFIGS)  # every config the docs launch with ships


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_on_two_ranks(tmp_path: Path, config: str, helper: str, **env: str) -> list[dict]:
    """`accelerate launch --config_file <config>.yaml --num_processes 2 tests/<helper> tmp_path` on the
    CPU over a bf16 copy of the tiny maze model in tmp_path/init; each rank's findings."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.integrations.trl import config_file

    warmup = CHECKPOINTS / "maze-warmup"
    AutoModelForCausalLM.from_pretrained(warmup, dtype=torch.bfloat16).save_pretrained(tmp_path / "init")
    AutoTokenizer.from_pretrained(warmup).save_pretrained(tmp_path / "init")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", **env}
    done = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config_file(config)),
                           "--num_processes", "2", "--main_process_port", str(free_port()),
                           str(ROOT / "tests" / helper), str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]


def assert_bf16_export_of_the_trained_weights(main: dict) -> None:
    """The main rank's findings: the export is bf16 as its init, the trained masters rounded, and generates as they do."""
    assert main["init_stored"] == main["stored"] == ["BF16"] and main["config_dtype"] == "bfloat16"
    assert main["reloaded_dtype"] == "torch.bfloat16" and main["bytes"] == main["init_bytes"]
    assert main["unexpected"] == [] and main["equal"] == main["keys"]  # the export is the trained masters, rounded to bf16
    assert len(main["moved"]) > len(main["keys"]) // 2  # training moved the weights past bf16's rounding
    assert main["reloaded_tokens"] == main["trained_tokens"] and all(main["trained_tokens"])


@pytest.mark.slow
def test_fsdp2_two_ranks_export_a_bf16_model_as_bf16_that_generates_like_the_trained_one(tmp_path):
    ranks = train_on_two_ranks(tmp_path, "fsdp2", "trl_fsdp_ranks.py")
    assert all(r["world"] == 2 and r["fsdp2"] and r["sharded"] and r["backend"] == "gloo" for r in ranks)
    assert_bf16_export_of_the_trained_weights(ranks[0])
