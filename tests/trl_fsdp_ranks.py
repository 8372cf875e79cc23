"""Run by tests/test_trl_fsdp.py under `accelerate launch --config_file fsdp2.yaml --num_processes 2`:
a short `--engine trl` run of a bf16 checkpoint sharded by FSDP2 over two CPU processes (gloo),
its export, and on rank 0 the checks of the export against the trained weights; writes
OUT/rank<R>.json. `train_and_check` is shared with tests/trl_deepspeed_ranks.py.

The one test-only part is `gpu_world_on_cpu`: accelerate turns FSDP on only for GPU-like devices
(a CPU run becomes plain MULTI_CPU data parallel), so it is told the CPU processes are
"MULTI_GPU" on gloo and left on the CPU. Everything after that is accelerate's own FSDP2
preparation (fully_shard per transformer block), TRL's training and the project's export.
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

STEPS, PROMPTS, GROUP, NEW_TOKENS = 2, 2, 2, 16


def gpu_world_on_cpu() -> None:
    """Make accelerate treat CPU processes under a launcher as a GPU world on gloo."""
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType

    def prepare_backend(self, cpu=False, sagemaker_dp=False, backend=None):
        if not torch.distributed.is_initialized():
            torch.distributed.init_process_group("gloo")
        return "gloo", DistributedType.MULTI_GPU

    def set_device(self):
        if self.device is None:
            self.device = torch.device("cpu")

    PartialState._prepare_backend = prepare_backend
    PartialState.set_device = set_device


def stored_dtypes(path: Path) -> list[str]:
    """The dtypes a safetensors file's header declares, one per tensor."""
    with open(path, "rb") as handle:
        header = json.loads(handle.read(struct.unpack("<Q", handle.read(8))[0]))
    return sorted({entry["dtype"] for name, entry in header.items() if name != "__metadata__"})


def full_parameters(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The trained parameters, each FSDP2 shard gathered with DTensor.full_tensor (every rank calls it)."""
    from torch.distributed.tensor import DTensor

    return {name: (p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu() for name, p in model.named_parameters()}


def greedy(model, prompts: list[list[int]]) -> list[list[int]]:
    with torch.no_grad():
        return [model.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False)[0, len(ids):].tolist()
                for ids in prompts]


def train_and_check(out: Path, trained_weights: Callable[[Any], dict[str, torch.Tensor]]) -> tuple[Any, dict]:
    """Train a copy of out/init for STEPS steps, export it to out/run and, on the main process,
    check the export against `trained_weights(grpo)` (every rank calls it, before the export);
    returns the trainer and this rank's findings."""
    from training.config import TrainConfig
    from training.integrations import trl as engine

    torch.set_num_threads(1)
    config = TrainConfig(task="maze", algo="vpo", init=str(out / "init"), out=str(out / "run"), steps=STEPS, prompts=PROMPTS,
                         group=GROUP, max_new_tokens=NEW_TOKENS, lr=1e-3, entropy_coef=0.05, seed=1, options={"K": 8},
                         device="cpu")
    grpo, _ = engine.fit(config, progress=False)
    trained = trained_weights(grpo)  # before the export, from the shards themselves
    engine.export(grpo, config, out / "run")
    result: dict = {"world": grpo.accelerator.num_processes, "backend": str(torch.distributed.get_backend())}
    if grpo.accelerator.is_main_process:
        with engine.without_zero3():  # the checks' models are this process's alone
            result.update(export_checks(out / "init", out / "run", trained))
    return grpo, result


def export_checks(init: Path, run: Path, trained: dict[str, torch.Tensor]) -> dict:
    """The export in `run` against the checkpoint `init` it started from and the `trained` weights."""
    from transformers import AutoModelForCausalLM

    import tasks
    from evo.policies.prompt_format import PromptFormat
    from training import models

    reference = AutoModelForCausalLM.from_pretrained(init, dtype=torch.bfloat16)  # the trained weights, as bf16
    _, unexpected = reference.load_state_dict({k: v.to(torch.bfloat16) for k, v in trained.items()}, strict=False)
    reloaded = AutoModelForCausalLM.from_pretrained(run, dtype="auto")
    start = AutoModelForCausalLM.from_pretrained(init, dtype="auto").state_dict()
    task, (_, tokenizer) = tasks.get("maze"), models.load(str(init))
    prompts = PromptFormat.of_checkpoint(init, tokenizer).encode(tokenizer, [task.prompt(i, 3) for i in task.instances("test", 3, seed=0)])
    saved = reloaded.state_dict()
    return {
        "unexpected": unexpected, "reloaded_dtype": str(reloaded.dtype),
        "config_dtype": json.loads((run / "config.json").read_text())["dtype"],
        "stored": stored_dtypes(run / "model.safetensors"), "init_stored": stored_dtypes(init / "model.safetensors"),
        "bytes": (run / "model.safetensors").stat().st_size, "init_bytes": (init / "model.safetensors").stat().st_size,
        "equal": sorted(k for k, v in reference.state_dict().items() if torch.equal(v, saved[k])), "keys": sorted(saved),
        "moved": sorted(k for k in saved if not torch.equal(saved[k], start[k])),
        "trained_tokens": greedy(reference, prompts), "reloaded_tokens": greedy(reloaded, prompts)}


def main(out: Path) -> None:
    gpu_world_on_cpu()
    grpo, result = train_and_check(out, lambda grpo: full_parameters(grpo.model))
    accelerator = grpo.accelerator
    result.update({"fsdp2": accelerator.is_fsdp2, "sharded": type(grpo.model).__name__.startswith("FSDP")})
    (out / f"rank{accelerator.process_index}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
