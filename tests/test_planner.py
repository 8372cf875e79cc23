"""The memory plan: micro-batches from a token budget, gradient checkpointing when the plan
needs it, a predicted peak within 15% of the measured one (CPU, a memory cap)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from evo.errors import UserError
from evo.policies import CHECKPOINTS
from tasks import get
from tests.test_models import make_init
from tests.toytask import CharMix
from training import memory, optimizer, planner, trainer
from training.config import TrainConfig
from training.loss import checkpointed_layers
from training.trainer import run, setup, train_step

ROOT = Path(__file__).resolve().parents[1]
torch.set_num_threads(1)


def peak_run(rows: int) -> dict:
    """tests/planner_peak.py in a fresh process, glibc's mmap threshold fixed (the resident set
    then follows the tensors in use instead of keeping freed heap pages)."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "planner_peak.py"), str(rows)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "memory plan: micro-batches of <=" in done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CPU peak is reset through /proc")
@pytest.mark.parametrize("rows, micro_batches, checkpointing", [(8, (4, 4), False), (5, (2, 4), True)])
def test_the_predicted_peak_is_within_15_percent_of_the_measured_one(rows, micro_batches, checkpointing):
    """A budget for `rows` of the 32 rollouts: 4 micro-batches; under one prompt group's worth
    (8), gradient checkpointing turns on and the step still splits (2-4 micro-batches: the
    plan re-measures a token's cost with checkpointing on, and that probe varies by run)."""
    figures = peak_run(rows)
    assert figures["checkpointing"] == checkpointing
    assert micro_batches[0] <= figures["micro_batches"] <= micro_batches[1], figures
    assert 0.85 <= figures["measured"] / figures["predicted"] <= 1.15, figures
    assert figures["planned_peak"] <= figures["cap"]


def config(init, out, **overrides) -> TrainConfig:
    base = dict(task="charmix", algo="grpo", init=str(init), out=str(out), steps=1, prompts=2, group=6,
                max_new_tokens=8, lr=1e-3, seed=0, device="cpu")
    return TrainConfig(**{**base, **overrides})


def test_a_tiny_run_plans_one_micro_batch_and_trains_as_before(tmp_path, capsys):
    """The shipped tiny model without --micro-batches: one micro-batch, the same step as --micro-batches 1."""
    common = dict(task="maze", algo="vpo", init=str(CHECKPOINTS / "maze-warmup"), steps=2, prompts=2, group=4,
                  max_new_tokens=64, seed=1, device="cpu", idle_steps=0)
    planned = run(TrainConfig(**common, out=str(tmp_path / "a")), task=get("maze"), progress=False)
    assert "1 per step at most), gradient checkpointing off" in capsys.readouterr().err
    fixed = run(TrainConfig(**common, out=str(tmp_path / "b"), micro_batches=1), task=get("maze"), progress=False)
    for a, b in zip(planned, fixed):
        assert {k: a[k] for k in ("loss", "grad_norm", "scalar")} == {k: b[k] for k in ("loss", "grad_norm", "scalar")}


def test_a_cap_splits_the_step_and_turns_checkpointing_on(tmp_path, capsys):
    init = make_init(tmp_path / "init", "qwen2")
    free = setup(config(init, tmp_path / "free"), False, CharMix())
    reference = train_step(free)
    plan = free.memory
    assert plan is not None and not plan.checkpointing and not checkpointed_layers(free.model)
    length = free.config.max_new_tokens + 8
    cap = plan.resident_bytes + plan.fixed_bytes + plan.token_bytes * 3 * length  # ~3 rollouts without checkpointing
    state = setup(config(init, tmp_path / "capped", memory_gib=cap / memory.GIB), False, CharMix())
    record = train_step(state)
    assert state.memory.checkpointing and checkpointed_layers(state.model)
    assert "gradient checkpointing on" in capsys.readouterr().err
    assert record["loss"] == pytest.approx(reference["loss"], rel=1e-4, abs=1e-6)  # same step, other micro-batches
    assert record["grad_norm"] == pytest.approx(reference["grad_norm"], rel=1e-3)


def test_a_model_that_cannot_fit_is_refused_before_any_sampling(tmp_path, monkeypatch):
    """A budget below the weights, moments and gradients: one line from setup, naming the ways
    out that help (LoRA, ZeRO-3 over N GPUs), and nothing sampled."""
    init = make_init(tmp_path / "init", "qwen2")
    monkeypatch.setattr(trainer, "sample", lambda state: pytest.fail("sampled before the memory check"))
    with pytest.raises(UserError) as refused:
        run(config(init, tmp_path / "out", memory_gib=1e-5), task=CharMix(), progress=False)
    message = str(refused.value)
    assert "\n" not in message and "more than the 0.00 GiB memory budget" in message
    assert "--lora-rank 16" in message and re.search(r"over \d+ or more GPUs with ZeRO-3", message)


def test_a_budget_below_one_rollout_stops_in_one_line(tmp_path):
    """The states fit, one rollout's activations do not: one line before the first update."""
    init = make_init(tmp_path / "init", "qwen2")
    settings = dict(gradient_checkpointing=True, max_new_tokens=64)
    free = setup(config(init, tmp_path / "free", **settings), False, CharMix())
    train_step(free)
    plan = free.memory
    assert plan.step_bytes * 2 < plan.token_bytes * 72  # one rollout (8 + 64 tokens) needs far more than the step
    cap = plan.resident_bytes + plan.step_bytes + 16_384
    with pytest.raises(UserError, match=r"one rollout of \d+ tokens .* memory budget; lower --max-new-tokens, train LoRA"):
        run(config(init, tmp_path / "out", memory_gib=cap / memory.GIB, **settings), task=CharMix(), progress=False)


def test_the_plan_counts_the_optimizer_step():
    """Tensor by tensor (the CPU's AdamW) the step holds two temporaries of the largest
    parameter; the fused kernel none; `foreach` a copy of every parameter."""
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 8))
    adamw = optimizer.adamw(model.parameters(), lr=1e-3, weight_decay=0.0)
    assert adamw.param_groups[0]["foreach"] is False and not adamw.param_groups[0]["fused"]
    assert optimizer.step_bytes(adamw) == 2 * 64 * 32 * 4
    assert optimizer.step_bytes(torch.optim.AdamW(model.parameters(), foreach=True)) == sum(
        p.numel() * 4 for p in model.parameters())
    plan = planner.MemoryPlan(1000, False, resident_bytes=100, fixed_bytes=10, token_bytes=1.0, capacity_bytes=2000,
                              step_bytes=500)
    assert plan.peak_bytes(100) == 600 and plan.peak_bytes(900) == 1010  # the step's, or the activations', whichever is larger
