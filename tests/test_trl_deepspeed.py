"""`--engine trl` under the shipped DeepSpeed ZeRO-2 and ZeRO-3 accelerate configs, two CPU
processes (DeepSpeed's CPU accelerator on gloo): a bf16 checkpoint trains with float32 masters
(ZeRO-3 partitions them), the export gathers them and writes bf16 weights the size of the input,
and the reloaded export generates what the trained weights do; the FSDP2 test's checks."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")
pytest.importorskip("deepspeed", reason="ZeRO-2/ZeRO-3 on CPU need deepspeed: pip install deepspeed")

from tests.test_trl_fsdp import assert_bf16_export_of_the_trained_weights, train_on_two_ranks  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_zero_two_ranks_export_a_bf16_model_as_bf16_that_generates_like_the_trained_one(tmp_path, stage):
    ranks = train_on_two_ranks(tmp_path, f"zero{stage}", "trl_deepspeed_ranks.py", DS_ACCELERATOR="cpu")
    assert all(r["world"] == 2 and r["deepspeed"] and r["stage"] == stage and r["backend"] == "gloo" for r in ranks)
    assert all(r["engine"] == "DeepSpeedEngine" for r in ranks)
    # ZeRO-3 leaves each rank a part of every parameter; ZeRO-2 holds them whole
    assert all(r["partitioned"] == (r["parameters"] if stage == 3 else []) and r["parameters"] for r in ranks)
    assert_bf16_export_of_the_trained_weights(ranks[0])
