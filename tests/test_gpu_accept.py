"""scripts/gpu_accept.sh, the GPU acceptance run, end to end on CPU at tiny sizes (a 152k-token
vocabulary, a 64-wide Qwen2-layout model): every figure it prints is there and sane."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_gpu_accept_prints_every_figure_on_cpu(tmp_path):
    env = {**os.environ, "PY": sys.executable, "DEVICE": "cpu", "SHAPE": "tiny", "PROMPTS": "2", "GROUP": "2",
           "PROMPT_TOKENS": "8", "NEW_TOKENS": "8", "MICRO": "1,2", "STAGES": "speed", "OUT": str(tmp_path), "OMP_NUM_THREADS": "1"}
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_accept.sh")], capture_output=True, text=True, env=env,
                         timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    assert figures == json.loads((tmp_path / "gpu_accept.json").read_text())
    assert figures["parameters"] > 151936 * 64 and figures["dtype"] == "float32"
    assert figures["sampler_tokens_per_s"] > 0 and figures["generate_tokens_per_s"] > 0
    gap = figures["sampler_logprob_gap"]  # float32 on CPU: the sampler's and the trainer's forward agree
    assert gap["tokens"] == 2 * 2 * 8 and 0 <= gap["mean"] <= gap["max"] < 1e-3
    assert set(figures["updates"]) == {"full_mb1", "full_mb2", "checkpointing_mb1", "lora16_mb1"}
    for row in figures["updates"].values():
        assert row["seconds"] > 0 and row["peak_memory_gib"] > 0 and row["loss_finite"]
        assert row["step_seconds"] > row["seconds"]


def run_learning(tmp_path, **settings) -> tuple[subprocess.CompletedProcess, dict]:
    env = {**os.environ, "PY": sys.executable, "DEVICE": "cpu", "STAGES": "learn", "LEARN_SIZE": "nano",
           "OUT": str(tmp_path), "OMP_NUM_THREADS": "1", **settings}
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_accept.sh")], capture_output=True, text=True, env=env,
                         timeout=900, cwd=ROOT)
    figures = json.loads((tmp_path / "gpu_accept.json").read_text())
    assert figures == json.loads(run.stdout.strip().splitlines()[-1])
    return run, figures["learning"]


@pytest.mark.slow
def test_learning_stage_fails_loudly_below_its_margin(tmp_path):
    """A few steps cannot lift the reward by 1.0: exit 1, the JSON still written, the dtypes recorded."""
    run, learning = run_learning(tmp_path, LEARN_STEPS="20", LEARN_BATCH="8", LEARN_POOL="50", LEARN_INSTANCES="4",
                                 LEARN_MARGIN="1.0")
    assert run.returncode == 1 and "learning stage failed" in run.stderr
    assert learning["passed"] is False and learning["margin"] == 1.0
    assert learning["master_dtype"] == "float32" and learning["autocast_dtype"] is None
    assert learning["compute_dtype"] == ["float32"] and learning["last_loss"] < learning["first_loss"]
    assert learning["reward_before"] == learning["before"]["mean_scalar"] == 0.0


@pytest.mark.slow
def test_learning_stage_learns_on_cpu(tmp_path):
    """The CPU-sized stage (the docs' setting, about 2.5 minutes on one core): reward 0 -> above the margin."""
    run, learning = run_learning(tmp_path, LEARN_STEPS="300", LEARN_BATCH="24", LEARN_INSTANCES="16")
    assert run.returncode == 0, run.stderr[-3000:]
    assert learning["passed"] and learning["rise"] > learning["margin"] == 0.03
    assert learning["reward_after"] > learning["reward_before"] == 0.0


@pytest.mark.slow
def test_the_issue_44_stages_print_their_figures_on_cpu(tmp_path):
    """memory (the plan against the measured update, optimizer step included), online (every
    weight tensor moved by one step from a bf16 checkpoint), export (bf16 on disk, the input's
    size, the same plan from the export): at tiny sizes on the CPU."""
    env = {**os.environ, "PY": sys.executable, "DEVICE": "cpu", "STAGES": "memory,online,export", "MEMORY_SHAPE": "tiny",
           "MEMORY_ROWS": "4", "MEMORY_PROMPT": "8", "MEMORY_COMPLETION": "8", "OUT": str(tmp_path), "OMP_NUM_THREADS": "1"}
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_accept.sh")], capture_output=True, text=True, env=env,
                         timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    plan = figures["memory"]
    assert plan["predicted_gib"] >= 0 and plan["measured_over_predicted"] > 0 and not plan["fused_adamw"]
    assert plan["micro_batches"] >= 1 and plan["step_transient_gib"] >= 0
    online = figures["online"]
    assert online["steps"] == 1 and online["moved_share"] == 1.0 and online["master_dtypes"] == ["float32"]
    export = figures["export"]
    assert export["dtypes_on_disk"] == ["bfloat16"] and export["config_dtype"] == "bfloat16"
    assert abs(export["size_over_input"] - 1) < 0.01 and export["same_plan"]
