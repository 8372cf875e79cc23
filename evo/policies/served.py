"""`openai:URL#MODEL;train=PATH`: a running `vllm serve` that `evo run --train` trains.

    VLLM_SERVER_DEV_MODE=1 vllm serve PATH --served-model-name M \\
        --worker-extension-cls evo.policies.vllm_transfer.WeightLoader \\
        --weight-transfer-config '{"backend": "evo_memory"}' &
    evo run SPEC --policy 'openai:http://127.0.0.1:8000#M;train=PATH' --train grpo

The server samples; this process holds the model (a torch copy of PATH, the directory the
server serves) and trains it; after each step the weights go into the running server through
vLLM's own weight-update endpoints (the development API, on with VLLM_SERVER_DEV_MODE=1):
`/pause` (in-flight requests finish first), `/start_weight_update`, `/update_weights` once per
chunk of tensors, `/finish_weight_update`, `/reset_prefix_cache`, `/resume`. The tensors ride
the requests as base64 safetensors in the server's dtype, at most `CHUNK_BYTES` a request,
received by the `evo_memory` backend of evo.policies.vllm_transfer (registered in the server's
workers by the worker extension, so vpo-evo must be importable there); each worker keeps its
own shard, so any tensor-parallel size is served. `check` reads the server's configuration
(`GET /server_info`) and refuses, in one line, a server without those endpoints or that backend;
a server a killed trainer left paused mid-push is closed and resumed there (`recover`).

Prompts are sent as token ids, encoded here as the checkpoint was trained
(evo.policies.prompt_format, as `local:` and `vllm:`), and completions come back as token ids
(`return_token_ids`): the ids the learner records are the ids the server sampled from.
"""

from __future__ import annotations

import base64
import contextlib
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from evo.errors import UserError, WorkFailed
from evo.policies.base import Completion
from evo.policies.openai import OpenAIConfig, OpenAIPolicy
from evo.policies.prompt_format import PromptFormat
from evo.policies.transport import NotJSON, RetryableError, one_line

BACKEND = "evo_memory"  # evo.policies.vllm_transfer.BACKEND (that module imports torch and vLLM's side)
EXTENSION = "evo.policies.vllm_transfer.WeightLoader"
CHUNK_BYTES = 256 << 20  # raw tensor bytes per /update_weights request (a third more as base64)
DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "torch.float32": "float32",
          "torch.float16": "float16", "torch.bfloat16": "bfloat16"}
HOW = (f"start it as VLLM_SERVER_DEV_MODE=1 vllm serve PATH --worker-extension-cls {EXTENSION} "
       f"--weight-transfer-config '{{\"backend\": \"{BACKEND}\"}}' (vpo-evo installed in its env)")


# vLLM's neutral values of the sampling settings a served model's generation_config.json can set
NEUTRAL_SAMPLING = {"top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}


class ServedPolicy(OpenAIPolicy):
    """An `openai:` policy over a `vllm serve` of the checkpoint `config.train`, Trainable."""

    def __init__(self, config: OpenAIConfig) -> None:
        from evo.policies.checkpoints import resolve_checkpoint
        from evo.policies.local import load_tokenizer

        if config.chat:
            raise UserError("openai: ;train= prompts as the checkpoint was trained (its chat template or plain text, "
                            "sent as token ids); drop ;chat")
        super().__init__(OpenAIConfig(**{**config.__dict__, "token_ids": True}))
        self.path = resolve_checkpoint(config.train)
        self.tokenizer = load_tokenizer(self.path)
        self.prompt_format = PromptFormat.of_checkpoint(self.path, self.tokenizer)
        self.dtype = ""  # the server's weights' dtype (server_info), what the pushes carry

    def check(self) -> None:
        """The model is served (OpenAIPolicy.check), the server exposes vLLM's weight-update
        endpoints with the `evo_memory` backend, and its transfer engine is ready."""
        super().check()
        info = self._dev("GET", "/server_info?config_format=json", None, "read the server's configuration")
        config = info.get("vllm_config") if isinstance(info, dict) else None
        if not isinstance(config, dict):
            raise UserError(f"openai: {self._root()}/server_info is not vLLM's server info; {HOW}")
        backend = (config.get("weight_transfer_config") or {}).get("backend")
        if backend != BACKEND:
            raise UserError(f"openai: {self._root()} has no {BACKEND!r} weight-transfer backend "
                            f"(it has {backend or 'none'}), so ;train cannot push weights into it; {HOW}")
        self.dtype = DTYPES.get(str((config.get("model_config") or {}).get("dtype")), "")
        self.recover()
        self._dev("POST", "/init_weight_transfer_engine", {"init_info": {}}, "start the weight transfer")

    def recover(self) -> None:
        """A server left paused by a trainer killed mid-push (vLLM then keeps the scheduler paused,
        and the update open, refusing the next `/start_weight_update`): close the open update, if
        any, and resume, saying so in one line. The next push rewrites every tensor."""
        state = self._dev("GET", "/is_paused", None, "read whether it is paused")
        if not (isinstance(state, dict) and state.get("is_paused")):
            return
        print(f"warning: openai: {self._root()} was paused, as a trainer killed during a weight push leaves it; "
              "resuming it (this run pushes every weight before it samples)", file=sys.stderr, flush=True)
        with contextlib.suppress(UserError, WorkFailed):  # killed before start or after finish: none to close
            self._dev("POST", "/finish_weight_update", None, "close the interrupted weight update")
        self._dev("POST", "/resume", None, "resume sampling")

    def generate(self, prompts: Sequence[str] | Sequence[Sequence[int]], *, n: int = 1, max_new_tokens: int = 256,
                 temperature: float = 1.0, top_p: float = 1.0, seed: int | None = None,
                 stop: Sequence[str] = ()) -> list[list[Completion]]:
        """Each prompt sent as the token ids `encode` gives (what the learner records); each
        completion must come back with its token ids (what the learner trains on)."""
        groups = super().generate(self.encode(prompts), n=n, max_new_tokens=max_new_tokens, temperature=temperature,
                                  top_p=top_p, seed=seed, stop=stop)
        if any(c.text and not c.token_ids for group in groups for c in group):
            raise UserError(f"openai: {self._root()} returned completions without their token ids: it ignores "
                            "`return_token_ids`, which ;train= needs to train on what it sampled; serve the model "
                            "with a vLLM that returns them (0.31 is tested)")
        return groups

    def _body(self, *args: Any) -> dict:
        """The request, with every sampling setting `vllm serve` would otherwise take from the
        checkpoint's generation_config.json (Qwen2.5-Instruct's: top_k 20, repetition penalty
        1.05) set to none: the learner trains on these samples as drawn at the asked temperature
        and top-p, as `local:` and the trainer's own rollouts draw them."""
        return {**super()._body(*args), **NEUTRAL_SAMPLING}

    # -- Trainable (evo.policies.base): a torch copy is trained, its weights pushed in ---------

    def checkpoint(self) -> Path:
        return self.path

    def encode(self, prompts: Sequence[str] | Sequence[Sequence[int]]) -> list[list[int]]:
        """Token ids of prompt texts in the checkpoint's prompt format; token ids are kept as given."""
        return self.prompt_format.ids(self.tokenizer, prompts)

    def trainee(self) -> tuple[Any, Any]:
        """A float32 torch copy of the checkpoint (on CUDA when torch sees a GPU) and its
        tokenizer; its weights are pushed at once, so the server samples what this process holds."""
        import torch

        from evo.policies.local import load_causal_lm

        model, tokenizer = load_causal_lm(self.path, device="cuda" if torch.cuda.is_available() else "cpu")
        self.push(model)
        return model, tokenizer

    def push(self, model: Any) -> None:
        """The model's weights into the server (every name, in the server's dtype), chunk by chunk."""
        import torch

        dtype = getattr(torch, self.dtype) if self.dtype else None
        state = model.state_dict() if hasattr(model, "state_dict") else model
        self._dev("POST", "/pause?mode=wait", None, "pause it for a weight update")
        try:
            self._dev("POST", "/start_weight_update", None, "start a weight update")
            for chunk in chunks(state, dtype, CHUNK_BYTES):
                self._dev("POST", "/update_weights", {"update_info": {"weights": chunk}}, "load weights")
            self._dev("POST", "/finish_weight_update", None, "finish a weight update")
            self._dev("POST", "/reset_prefix_cache", None, "reset its prefix cache")
        except BaseException:
            with contextlib.suppress(UserError, WorkFailed):  # the first failure is the one to report
                self._dev("POST", "/resume", None, "resume sampling")
            raise
        self._dev("POST", "/resume", None, "resume sampling")

    def _root(self) -> str:
        """The server's address: the development endpoints live beside /v1, not under it."""
        return self.config.base_url.removesuffix("/v1")

    def _dev(self, method: str, path: str, body: dict | None, doing: str) -> Any:
        """One request to a development endpoint, no retries (a weight update is not idempotent);
        a 404 is a server without the endpoints, any other failure one line."""
        try:
            return self._request_at(self._root() + path, method, body)
        except UserError as error:
            if "HTTP 404" in str(error):
                raise UserError(f"openai: {self._root()} does not expose vLLM's weight-update endpoints "
                                f"({method} {path.partition('?')[0]}: HTTP 404); {HOW}") from None
            raise
        except (RetryableError, NotJSON) as error:
            raise WorkFailed(f"openai: could not {doing} on {self._root()} ({method} {path.partition('?')[0]}: "
                             f"{one_line(str(error))}); the next evo run --resume pushes the trained weights "
                             "again") from None

    def _request_at(self, url: str, method: str, body: dict | None) -> Any:
        from evo.policies.transport import exchange

        headers = {"Content-Type": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        return exchange(method, url, body, headers, self.config.timeout)


def chunks(state: Mapping[str, Any], dtype: Any, limit: int) -> Iterator[str]:
    """The tensors of `state` (floating ones cast to `dtype` when given) as base64 safetensors
    strings (evo.policies.vllm_engine.packed) of at most `limit` raw bytes each (a larger tensor
    travels alone)."""
    import torch

    from evo.policies.vllm_engine import packed

    batch: dict[str, Any] = {}
    size = 0
    for name, tensor in state.items():
        cast = dtype is not None and tensor.is_floating_point()
        nbytes = tensor.numel() * (torch.empty((), dtype=dtype).element_size() if cast else tensor.element_size())
        if batch and size + nbytes > limit:
            yield base64.b64encode(packed(batch, dtype)).decode()
            batch, size = {}, 0
        batch[name], size = tensor.detach(), size + nbytes
    if batch:
        yield base64.b64encode(packed(batch, dtype)).decode()
