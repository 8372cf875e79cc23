"""The vLLM worker side of a weight sync; imported only where vLLM runs (every TP worker).

Recent vLLM (0.31 here) has a weight-transfer API: `LLM.start_weight_update` / `update_weights` /
`finish_weight_update`, each a `collective_rpc` to every worker (all tensor-parallel ranks),
where a registered `WeightTransferEngine` backend receives the tensors. vLLM's own backends
(`nccl`, `ipc`) need CUDA and a trainer-side rendezvous; `MemoryTransfer` (backend
`BACKEND`) takes the trainer's full Hugging Face tensors in the RPC itself: as they are when
the worker runs in the trainer's process, as one safetensors byte string otherwise. Each
worker's `model.load_weights` keeps its own shard, so any TP size is served by one code path.
Importing this module registers the backend, in the trainer and in each worker process (vLLM
imports the worker extension below before it loads the model).

Older vLLM has no such API: `WeightLoader.evo_load_weights`, mixed into the workers
(`worker_extension_cls`), is the fallback, also reached on every worker by `collective_rpc`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

BACKEND = "evo_memory"
RELOAD_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"  # where vLLM's layerwise reload logs


class RotaryReloadNote(logging.Filter):
    """Drops one line of vLLM's layerwise reload, "RotaryEmbedding: Failed to load weights", which
    it logs at every push: a rotary layer's cos/sin cache is a buffer vLLM computes and no Hugging
    Face checkpoint holds, so a reload never loads it and vLLM puts the layer's own tensors back
    (vllm/model_executor/model_loader/reload/layerwise.py). A layer of any other kind that loads
    nothing is still logged: that would be a push that missed real weights."""

    def filter(self, record: logging.LogRecord) -> bool:
        layer = record.args[0] if isinstance(record.args, tuple) and record.args else ""
        return not (record.msg == "%s: Failed to load weights" and str(layer).endswith("RotaryEmbedding"))


def quiet_rotary_reload() -> None:
    """Install RotaryReloadNote on vLLM's reload logger (once; in this process)."""
    logger = logging.getLogger(RELOAD_LOGGER)
    if not any(isinstance(f, RotaryReloadNote) for f in logger.filters):
        logger.addFilter(RotaryReloadNote())


quiet_rotary_reload()  # imported in the trainer and, as the worker extension, in every vLLM worker

try:
    from vllm.distributed.weight_transfer import WeightTransferEngine, WeightTransferEngineFactory
except ImportError:  # vLLM before the weight-transfer API: WeightLoader alone
    WeightTransferEngine = None


def unpack(weights: dict[str, Any] | bytes | str) -> dict[str, Any]:
    """name -> tensor, from the tensors themselves, their safetensors bytes, or those bytes in
    base64 (what a JSON request to `vllm serve`'s /update_weights carries)."""
    if isinstance(weights, str):
        import base64

        weights = base64.b64decode(weights, validate=True)
    if isinstance(weights, (bytes, bytearray, memoryview)):
        from safetensors.torch import load

        return load(bytes(weights))
    return weights


class WeightLoader:
    """Mixed into vLLM's workers (worker_extension_cls); runs inside each worker."""

    def evo_load_weights(self, weights: dict[str, Any] | bytes | str) -> int:
        """Load name -> tensor (or those tensors in safetensors bytes) into the worker's model;
        returns how many."""
        weights = unpack(weights)
        if hasattr(self, "reload_weights"):  # vLLM >= 0.2x: re-runs the kernel repacking (CPU oneDNN)
            self.reload_weights(weights_iterator=iter(weights.items()))
        else:
            self.model_runner.model.load_weights(weights=iter(weights.items()))  # type: ignore[attr-defined]
        return len(weights)


@dataclass
class MemoryInit:
    """Nothing to agree on: the tensors ride the RPC."""


@dataclass
class MemoryUpdate:
    weights: dict[str, Any] | bytes | str  # name -> full tensor, or those tensors as safetensors bytes (base64 over HTTP)


if WeightTransferEngine is not None:

    class MemoryTransfer(WeightTransferEngine):
        """A backend whose update carries the tensors; checkpoint-format (layerwise reload,
        as vLLM's `ipc` backend, so CPU kernels are repacked after the load)."""

        init_info_cls = MemoryInit
        update_info_cls = MemoryUpdate

        def init_transfer_engine(self, init_info: MemoryInit) -> None:
            pass

        def start_weight_update(self) -> None:
            from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

            initialize_layerwise_reload(self.model)

        def finish_weight_update(self) -> None:
            from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

            finalize_layerwise_reload(self.model, self.model_config)

        def update_weights(self, update_info: dict[str, Any]) -> None:
            """vLLM's own `update_weights` ends in `torch.accelerator.synchronize()`, which raises on
            a CPU build; synchronize only where there is an accelerator."""
            self.receive_weights(self.parse_update_info(update_info))
            if torch.accelerator.is_available():
                torch.accelerator.synchronize()

        def receive_weights(self, update_info: MemoryUpdate) -> None:
            weights = unpack(update_info.weights)
            loaded = self.model.load_weights(iter(weights.items()))
            if weights and loaded is not None and not loaded:
                raise RuntimeError(f"{BACKEND}: the worker's model took none of {len(weights)} tensors")

        def shutdown(self) -> None:
            pass

    WeightTransferEngineFactory.register_engine(BACKEND, MemoryTransfer)
