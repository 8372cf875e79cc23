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
           "PROMPT_TOKENS": "8", "NEW_TOKENS": "8", "MICRO": "1,2", "OUT": str(tmp_path), "OMP_NUM_THREADS": "1"}
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_accept.sh")], capture_output=True, text=True, env=env,
                         timeout=600, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    assert figures == json.loads((tmp_path / "gpu_accept.json").read_text())
    assert figures["parameters"] > 151936 * 64 and figures["dtype"] == "float32"
    assert figures["sampler_tokens_per_s"] > 0 and figures["generate_tokens_per_s"] > 0
    assert set(figures["updates"]) == {"full_mb1", "full_mb2", "checkpointing_mb1", "lora16_mb1"}
    for row in figures["updates"].values():
        assert row["seconds"] > 0 and row["peak_memory_gib"] > 0 and row["loss_finite"]
        assert row["step_seconds"] > row["seconds"]
