"""Run by tests/test_trl_ranks.py under `torchrun --nproc-per-node 2`: a short `--engine trl`
run on the tiny maze model, its export, and each rank's check that the exported weights equal
the weights it trained; writes OUT/rank<R>.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from evo.policies import CHECKPOINTS
from training.config import TrainConfig
from training.integrations import trl as engine

PROMPTS, GROUP, STEPS = 2, 4, 2


def main(out: Path) -> None:
    torch.set_num_threads(1)
    init = CHECKPOINTS / "maze-warmup"
    config = TrainConfig(task="maze", algo="vpo", init=str(init), out=str(out), steps=STEPS, prompts=PROMPTS, group=GROUP,
                         max_new_tokens=16, lr=1e-3, entropy_coef=0.05, snapshot_every=STEPS, seed=1, options={"K": 8}, device="cpu")
    grpo, records = engine.fit(config, progress=False)
    engine.export(grpo, config, out)
    trained = grpo.accelerator.unwrap_model(grpo.model).state_dict()
    exported, start = load_file(out / "model.safetensors"), load_file(init / "model.safetensors")
    rank = grpo.accelerator.process_index
    (out / f"rank{rank}.json").write_text(json.dumps({
        "world": grpo.accelerator.num_processes, "backend": str(torch.distributed.get_backend()),
        "per_device_batch": grpo.args.per_device_train_batch_size,
        "equal": sorted(k for k in exported if torch.equal(exported[k], trained[k])), "keys": sorted(exported),
        "snapshot_equal": all(torch.equal(v, exported[k]) for k, v in load_file(
            out / "steps" / f"{STEPS:06d}" / "model.safetensors").items()),
        "moved": sorted(k for k in exported if k in start and not torch.equal(exported[k], start[k].to(exported[k].dtype))),
        "records": records}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
