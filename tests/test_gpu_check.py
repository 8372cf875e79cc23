"""scripts/gpu_check.sh, the GPU recipe, run end to end on CPU with tiny sizes (nano model,
two warm-up steps, one step per path; TRL samples with transformers, not vLLM, on CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.test_vllm import VLLM_PY, needs_vllm, vllm_env

ROOT = Path(__file__).resolve().parent.parent


@needs_vllm
def test_gpu_check_runs_all_three_paths_on_cpu(tmp_path):
    env = {**vllm_env(), "PY": sys.executable, "VLLM_PY": VLLM_PY, "SIZE": "nano", "WARMUP_STEPS": "2", "POOL": "16", "STEPS": "1",
           "PROMPTS": "2", "GROUP": "2", "TOKENS": "16", "DEVICE": "cpu", "TRL_VLLM": "0", "THREADS": "1",
           "OUT": str(tmp_path / "check"), "PYTHONPATH": os.environ.get("PYTHONPATH", str(ROOT))}
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], capture_output=True, text=True, env=env,
                         timeout=900, cwd=ROOT)
    logs = "".join((p.name + ":\n" + p.read_text()[-1500:]) for p in (tmp_path / "check").glob("*.log"))
    assert run.returncode == 0, run.stderr[-2000:] + logs
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    for path in ("local", "vllm", "trl"):
        assert figures[f"{path}_s_per_step"] > 0 and figures[f"{path}_tokens_per_s"] >= 0
        assert (tmp_path / "check" / path / "config.json").exists()  # each path wrote a loadable checkpoint
