"""Run by tests/test_planner.py in a fresh process (glibc's mmap threshold fixed, so the
resident set follows the tensors in use): the memory plan of a 4-layer Qwen2's update under a
budget, and the update's measured peak; prints one JSON line."""

from __future__ import annotations

import json
import sys

import numpy as np
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from training import memory, planner
from training.config import TrainConfig
from training.rollouts import Rollouts
from training.trainer import State, plan_memory, update

ROWS, PROMPT, COMPLETION = 32, 16, 112


def main(rows_per_micro_batch: int) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=128, intermediate_size=512, num_hidden_layers=4,
                                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                         tie_word_embeddings=False)).eval()
    rolls = Rollouts([], planner.probe_rollout(ROWS, PROMPT, COMPLETION, torch.device("cpu")), [], None, None, None, None)
    adv = np.random.default_rng(0).standard_normal(ROWS)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    base = dict(task="x", algo="grpo", init="x", out="x", prompts=ROWS // 8, group=8, max_new_tokens=COMPLETION,
                lr=1e-4, device="cpu")
    update(State(TrainConfig(**base, micro_batches=1), None, model, None, optimizer, None, 0), rolls, adv)  # AdamW's moments
    free = State(TrainConfig(**base), None, model, None, optimizer, None, 1)
    probe = plan_memory(free, rolls)  # no budget: what one token costs
    cap = probe.resident_bytes + probe.fixed_bytes + probe.token_bytes * rows_per_micro_batch * (PROMPT + COMPLETION) * 1.02
    state = State(TrainConfig(**base, memory_gib=cap / memory.GIB), None, model, None, optimizer, None, 1)
    state.memory = plan_memory(state, rolls)
    parts = state.memory.split(rolls.samples)
    before = memory.current_bytes("cpu")
    memory.reset_peak("cpu")
    update(state, rolls, adv)
    measured = memory.peak_bytes("cpu") - before
    largest = max(len(p) for p in parts) * (PROMPT + COMPLETION)
    print(json.dumps({"micro_batches": len(parts), "checkpointing": state.memory.checkpointing,
                      "predicted": state.memory.peak_bytes(largest) - state.memory.resident_bytes, "measured": measured,
                      "planned_peak": state.memory.peak_bytes(largest), "cap": cap}))


if __name__ == "__main__":
    main(int(sys.argv[1]))
