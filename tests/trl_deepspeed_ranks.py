"""Run by tests/test_trl_deepspeed.py under `accelerate launch --config_file zero2.yaml|zero3.yaml
--num_processes 2` with DS_ACCELERATOR=cpu: the FSDP2 helper's short `--engine trl` run of a
bf16 checkpoint (`trl_fsdp_ranks.train_and_check`), here under DeepSpeed ZeRO on two CPU
processes (gloo, DeepSpeed's CPU accelerator without oneCCL); writes OUT/rank<R>.json.

Test-only, besides the FSDP2 helper's `gpu_world_on_cpu`: accelerate and transformers turn
DeepSpeed on only when the run is not `cpu` (TRL's `use_cpu`), so both states are built as if it
were not; the devices stay the CPU.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from trl_fsdp_ranks import gpu_world_on_cpu, train_and_check


def deepspeed_on_cpu() -> None:
    """`gpu_world_on_cpu`, and accelerate's states built with cpu=False (the DeepSpeed path)."""
    from accelerate.state import AcceleratorState, PartialState

    gpu_world_on_cpu()
    for state in (PartialState, AcceleratorState):
        def init(self, *args, _init=state.__init__, cpu: bool = False, **kwargs):
            _init(self, *args, cpu=False, **kwargs)

        state.__init__ = init


def full_parameters(grpo) -> dict[str, torch.Tensor]:
    """The trained parameters, ZeRO-3 partitions gathered (every rank calls it; ZeRO-2 holds them whole)."""
    import deepspeed

    parameters = dict(grpo.model.named_parameters())
    with deepspeed.zero.GatheredParameters(list(parameters.values())):
        return {name: p.detach().cpu().clone() for name, p in parameters.items()}


def main(out: Path) -> None:
    deepspeed_on_cpu()
    grpo, result = train_and_check(out, full_parameters)
    accelerator = grpo.accelerator
    result.update({"deepspeed": str(accelerator.distributed_type).endswith("DEEPSPEED"),
                   "stage": accelerator.deepspeed_config["zero_optimization"]["stage"],
                   "parameters": sorted(n for n, _ in grpo.model.named_parameters()),
                   "partitioned": sorted(n for n, p in grpo.model.named_parameters()  # this rank holds a part of it
                                         if hasattr(p, "ds_tensor") and p.ds_tensor.numel() < p.ds_numel),
                   "engine": type(grpo.model_wrapped).__name__})
    (out / f"rank{accelerator.process_index}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
