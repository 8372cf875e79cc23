"""The GPU acceptance run's checks of issue 44 (scripts/gpu_accept.py runs them as stages):

- `memory`: the memory plan of a randomly initialised model of Qwen2.5-3B's shape (float32
  masters, bf16 autocast on CUDA, the fused AdamW), 32 rollouts of 128 + 384 tokens: the
  predicted update peak (optimizer step included) against the measured one, as
  tests/planner_peak.py measures it on CPU (the second update, above the weights and moments);
- `online`: `evo run --train grpo` at lr 1e-6 on a tiny checkpoint stored in bf16 (a `local:`
  policy samples it in bf16 on CUDA): the share of weight tensors one step moves (all of them);
- `export`: `evo train` of that bf16 checkpoint, its export (bf16 on disk, the input's size)
  and `--init` of the export planning as the original (precision plan, lr, resident bytes).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from training import memory, optimizer, planner, precision, tiny
from training.config import TrainConfig
from training.rollouts import Rollouts
from training.trainer import State, plan_memory, update

SPEC = "examples/nguyen7/problem.toml"
ROOT = Path(__file__).resolve().parents[1]


def memory_stage(build, shape: str, device: str, rows: int, prompt: int, completion: int) -> dict:
    """Predicted vs measured peak of the planned update (`build(shape, device, dtype)` makes the model)."""
    model = build(shape, device, torch.float32)
    cuda = device.startswith("cuda")
    rolls = Rollouts([], planner.probe_rollout(rows, prompt, completion, torch.device(device)), [], None, None, None, None)
    adv = np.random.default_rng(0).standard_normal(rows)
    adamw = optimizer.adamw(model.parameters(), lr=1e-6, weight_decay=0.01)
    config = TrainConfig(task="x", algo="grpo", init="x", out="x", prompts=max(1, rows // 8), group=min(8, rows),
                         max_new_tokens=completion, lr=1e-6, device="cuda" if cuda else "cpu", bf16=cuda)
    state = State(config, None, model, None, adamw, None, 0)
    figures: dict = {"parameters": sum(p.numel() for p in model.parameters()), "rows": rows, "tokens": prompt + completion,
                     "fused_adamw": bool(adamw.param_groups[0].get("fused")),
                     "step_transient_gib": round(optimizer.step_bytes(adamw) / memory.GIB, 2)}
    try:
        state.memory = plan_memory(state, rolls)
        update(state, rolls, adv)  # AdamW's moments, then the measured update
        parts = state.memory.split(rolls.samples)
        before = memory.current_bytes(device)
        memory.reset_peak(device)
        update(state, rolls, adv)
        measured = memory.peak_bytes(device) - before
    except torch.OutOfMemoryError:
        figures["oom"] = True
        return figures
    plan = state.memory
    predicted = plan.peak_bytes(max(len(p) for p in parts) * (prompt + completion)) - plan.resident_bytes
    figures.update(micro_batches=len(parts), checkpointing=plan.checkpointing, capacity_gib=round(plan.capacity_bytes / memory.GIB, 2),
                   resident_gib=round(plan.resident_bytes / memory.GIB, 2), predicted_gib=round(predicted / memory.GIB, 2),
                   measured_gib=round(measured / memory.GIB, 2), measured_over_predicted=round(measured / predicted, 3))
    return figures


def bf16_checkpoint(directory: Path) -> Path:
    tok = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tok, context=2048, seed=3).to(torch.bfloat16), tok, directory)
    return directory


def online_stage(device: str) -> dict:
    """One `evo run --train` step at lr 1e-6 from a bf16 checkpoint: the weight tensors it moved."""
    with tempfile.TemporaryDirectory() as scratch:
        init, out = bf16_checkpoint(Path(scratch) / "init"), Path(scratch) / "run"
        done = subprocess.run([sys.executable, "-m", "evo", "run", SPEC, "--policy", f"local:{init}", "--train", "grpo",
                               "--train-every", "1", "--train-option", "lr=1e-6", "--train-option", "entropy_coef=0.05",
                               "--iterations", "3", "--batch", "1", "--depth", "1", "--set", "prompt.style=continue",
                               "--set", "sandbox.workers=1", "--max-new-tokens", "12", "--seed", "5", "--quiet",
                               "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=300)
        if done.returncode != 0:
            return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
        state = torch.load(out / "online" / "state.pt", weights_only=True)
        initial = tiny.AutoModelForCausalLM.from_pretrained(init, dtype=torch.float32).state_dict()
        moved = [name for name, tensor in state["model"].items() if not torch.equal(tensor.cpu(), initial[name])]
        return {"device": device, "steps": state["step"], "tensors": len(initial), "moved": len(moved),
                "moved_share": round(len(moved) / len(initial), 4),
                "master_dtypes": sorted({precision.dtype_name(t.dtype) for t in state["model"].values()})}


def export_stage(device: str) -> dict:
    """`evo train` from a bf16 checkpoint -> its export -> `--init` of the export plans as the original."""
    from safetensors.torch import load_file

    from training.trainer import run, setup

    with tempfile.TemporaryDirectory() as scratch:
        init, out = bf16_checkpoint(Path(scratch) / "init"), Path(scratch) / "run"
        base = TrainConfig(task="maze", algo="grpo", init=str(init), out=str(out), steps=1, prompts=2, group=2,
                           max_new_tokens=16, seed=0, device=device, idle_steps=0, entropy_coef=0.05)
        run(base, progress=False)
        stored = load_file(out / "model.safetensors")
        plans = []
        for start in (init, out):
            state = setup(replace(base, init=str(start), out=str(Path(scratch) / f"again-{start.name}")), False)
            plans.append([str(state.config.lr), state.config.bf16, state.config.weight_dtype,
                          planner.resident_bytes(state.model, state.reference)])
        return {"dtypes_on_disk": sorted({precision.dtype_name(t.dtype) for t in stored.values()}),
                "config_dtype": json.loads((out / "config.json").read_text()).get("dtype"),
                "size_over_input": round((out / "model.safetensors").stat().st_size
                                         / (init / "model.safetensors").stat().st_size, 4),
                "plan_from_input": plans[0], "plan_from_export": plans[1], "same_plan": plans[0] == plans[1]}
