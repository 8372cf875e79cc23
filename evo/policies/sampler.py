"""The batched KV-cache sampler over an in-memory causal LM: the `local:` policy samples with
it, and so do the trainer's rollouts and the supervised warm-up's evaluation.

`Sampler(model, tokenizer).sample(prompts, n=...)` returns a `Rollout`: the completions and
the token tensors (ids, masks, sampling log-probs) the loss needs.

The loop does one model call per new token and nothing else heavy: the prompt is prefilled
once per distinct prompt and the cache is then repeated n times, the output buffers are
preallocated, and stop strings are checked on a short tail of tokens. Llama- and GPT-2-style
models run through evo.policies.fastlm (static KV cache, fused projections); any other
causal LM through its own forward and a DynamicCache.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any
from dataclasses import dataclass

import torch

from evo.errors import UserError
from evo.policies.base import Completion
from evo.policies.fastlm import FastLM
from evo.policies.fastlm import supports as fastlm_supports
from evo.policies.options import check_sampling
from evo.policies.prompt_format import PLAIN, PromptFormat
from evo.policies.sampling import first_stop, sample_next, tokens_through_stop

Prompts = Sequence[str] | Sequence[Sequence[int]]


@dataclass(frozen=True)
class Rollout:
    """A sampled batch as tensors; row i * n + j is sample j of prompt i."""

    prompt_ids: torch.Tensor  # [B, P] left-padded with the pad id
    prompt_mask: torch.Tensor  # [B, P] 1 on real prompt tokens
    completion_ids: torch.Tensor  # [B, T] right-padded; includes eos / the stop-completing token
    completion_mask: torch.Tensor  # [B, T] 1 on completion tokens
    logprobs: torch.Tensor  # [B, T] sampling-distribution log-probs, 0 under the mask
    completions: list[list[Completion]]  # [prompts][n]


@dataclass
class _Batch:
    tokens: torch.Tensor
    logprobs: torch.Tensor
    lengths: torch.Tensor  # completion length per row (until eos / stop / the end)
    stopped: torch.Tensor  # finished by eos or a stop string


def context_length(model: torch.nn.Module) -> int | None:
    """The most tokens the model's positions cover (None when its config does not say)."""
    return getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)


def cache_argument(model: torch.nn.Module) -> str:
    """The name of the KV-cache argument and output field of the model's forward
    (transformers 5.2x renamed `past_key_values` to `cache`)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


class Sampler:
    """Batched sampling from an in-memory causal LM (CPU or CUDA, the model's device)."""

    def __init__(self, model: torch.nn.Module, tokenizer, fast: bool = True, prompt_format: PromptFormat = PLAIN) -> None:
        """`fast=False` forces the model's own forward (the lean path covers Llama and GPT-2);
        `prompt_format` turns prompt texts into token ids (evo.policies.prompt_format)."""
        self.model = model
        self.fast = fast
        self.tokenizer = tokenizer
        self.prompt_format = prompt_format
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        eos = model.generation_config.eos_token_id if getattr(model, "generation_config", None) else None
        eos = tokenizer.eos_token_id if eos is None else eos
        self.eos_ids = tuple(eos) if isinstance(eos, (list, tuple)) else (eos,)
        self.context = context_length(model)
        self.cache_arg = cache_argument(model)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def sample(self, prompts: Prompts, *, n: int = 1, max_new_tokens: int = 256, temperature: float = 1.0,
               top_p: float = 1.0, seed: int | None = None, stop: Sequence[str] = (),
               ignore_eos: bool = False) -> Rollout:
        """Sample n completions for each prompt (strings, or token-id lists used as given).

        `ignore_eos` keeps sampling past the end-of-sequence token (benchmarks)."""
        check_sampling("local", n=n, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p)
        ids = self.encode(prompts)
        prompt_ids, prompt_mask = self._left_pad(ids)
        max_new = self._room(prompt_ids.shape[1], max_new_tokens)
        generator = None
        if seed is not None:
            generator = torch.Generator(device=self.device).manual_seed(seed)
        training = self.model.training
        self.model.eval()  # no dropout while sampling, even mid-training
        try:
            with torch.inference_mode():
                batch = self._decode_loop(prompt_ids, prompt_mask, n, max_new, temperature, top_p, generator,
                                          stop, () if ignore_eos else self.eos_ids)
        finally:
            self.model.train(training)
        return self._finish(prompt_ids.repeat_interleave(n, 0), prompt_mask.repeat_interleave(n, 0), batch,
                            n, max_new, stop)

    def encode(self, prompts: Prompts) -> list[list[int]]:
        """Token ids of prompt texts in the sampler's prompt format; ids are kept as given."""
        if not prompts:
            raise UserError("no prompts to sample from")
        return self.prompt_format.ids(self.tokenizer, prompts)

    def _left_pad(self, ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(x) for x in ids)
        tokens = torch.full((len(ids), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for row, x in enumerate(ids):
            if x:
                tokens[row, width - len(x):] = torch.tensor(x, dtype=torch.long)
                mask[row, width - len(x):] = 1
        return tokens.to(self.device), mask.to(self.device)

    def _room(self, prompt_len: int, max_new_tokens: int) -> int:
        if self.context is None:
            return max_new_tokens
        if prompt_len >= self.context:
            raise UserError(f"prompt of {prompt_len} tokens does not fit the model's context of "
                            f"{self.context} tokens; shorten the prompt")
        return min(max_new_tokens, self.context - prompt_len)

    def _decode_loop(self, prompt_ids, prompt_mask, n, max_new, temperature, top_p, generator, stop,
                     eos_ids: tuple[int, ...]) -> _Batch:
        rows, width = prompt_ids.shape[0] * n, prompt_ids.shape[1]
        position = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
        backend = (FastLM(self.model, rows, width + max_new) if self.fast and fastlm_supports(self.model)
                   else _HFBackend(self.model, self.cache_arg, rows, width + max_new))
        logits = backend.prefill(prompt_ids, prompt_mask, position, n)
        if n > 1:
            logits = logits.repeat_interleave(n, 0)
        next_position = position[:, -1].repeat_interleave(n, 0) + 1
        tokens = torch.full((rows, max_new), self.pad_id, dtype=torch.long, device=self.device)
        logprobs = torch.zeros((rows, max_new), dtype=torch.float32, device=self.device)
        done = torch.zeros(rows, dtype=torch.bool, device=self.device)
        lengths = torch.full((rows,), max_new, dtype=torch.long, device=self.device)
        eos = torch.tensor(eos_ids, dtype=torch.long, device=self.device)
        window = max((len(s) for s in stop), default=0) + 8
        rows_in_batch: torch.Tensor | slice = slice(None)  # the rows the backend still decodes
        left = 0  # rows that left the decoded batch (all finished)
        for t in range(max_new):
            tok, lp = sample_next(logits, temperature, top_p, generator)
            live = ~done[rows_in_batch]
            tokens[rows_in_batch, t] = tok.masked_fill(~live, self.pad_id)
            logprobs[rows_in_batch, t] = lp.masked_fill(~live, 0.0)
            if eos_ids or stop:
                ended = live & torch.isin(tok, eos)
                if stop:
                    ended |= live & self._hit_stop(tokens[rows_in_batch], t, window, stop, live)
                lengths[rows_in_batch] = torch.where(ended, t + 1, lengths[rows_in_batch])
                done[rows_in_batch] = done[rows_in_batch] | ended
            finished = int(done.sum())  # the step's one wait for the device
            if t + 1 == max_new or finished == rows:
                break
            if finished - left >= max(4, (rows - left) // 4):  # a quarter of the batch (at least 4 rows) finished
                rows_in_batch = self._drop_finished(backend, rows_in_batch, done, rows)
                left = rows - len(rows_in_batch)
            logits = backend.step(tokens[rows_in_batch, t], next_position[rows_in_batch] + t, width + t)
        return _Batch(tokens, logprobs, lengths, done)

    @staticmethod
    def _drop_finished(backend, rows_in_batch, done: torch.Tensor, rows: int) -> torch.Tensor:
        """The decoded rows without the finished ones, which leave the backend's batch."""
        current = torch.arange(rows, device=done.device)[rows_in_batch]
        keep = (~done[current]).nonzero()[:, 0]
        backend.select(keep)
        return current[keep]

    def _hit_stop(self, tokens: torch.Tensor, t: int, window: int, stop: Sequence[str], live: torch.Tensor) -> torch.Tensor:
        """Which rows of `tokens` (those `live`) end in a stop string by column t."""
        hit = torch.zeros_like(live)
        rows = live.nonzero()[:, 0].tolist()
        tails = self.tokenizer.batch_decode(tokens[rows, max(0, t + 1 - window):t + 1].tolist(), skip_special_tokens=True)
        for row, text in zip(rows, tails):
            hit[row] = first_stop(text, stop) >= 0
        return hit

    def _finish(self, prompt_ids, prompt_mask, batch: _Batch, n: int, max_new: int, stop: Sequence[str]) -> Rollout:
        lengths = batch.lengths.tolist()
        token_rows = batch.tokens.tolist()
        lp_rows = batch.logprobs.tolist()
        stopped = batch.stopped.tolist()
        completions: list[Completion] = []
        for row, length in enumerate(lengths):
            ids = token_rows[row][:length]
            text = self.tokenizer.decode(ids, skip_special_tokens=True)
            cut = first_stop(text, stop) if stop else -1
            if cut >= 0:
                length = tokens_through_stop(ids, cut, stop, self._decode)
                ids, text, lengths[row] = ids[:length], text[:cut], length
            finish = "stop" if stopped[row] or cut >= 0 else "length"
            completions.append(Completion(text, tuple(ids), tuple(lp_rows[row][:length]), finish))
        keep = torch.arange(max_new, device=self.device)[None, :] < torch.tensor(lengths, device=self.device)[:, None]
        mask = keep[:, : batch.tokens.shape[1]].long()
        grouped = [completions[i:i + n] for i in range(0, len(completions), n)]
        return Rollout(prompt_ids, prompt_mask, batch.tokens.masked_fill(mask == 0, self.pad_id), mask,
                       batch.logprobs * mask, grouped)

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)


class _HFBackend:
    """Decoding through the model's own forward and a DynamicCache (any causal LM)."""

    def __init__(self, model: torch.nn.Module, cache_arg: str, rows: int, length: int) -> None:
        self.model, self.cache_arg = model, cache_arg
        self.mask: torch.Tensor | None = None
        self.shape = (rows, length)
        self.cache: Any = None  # the model's KV cache (a transformers Cache)

    def prefill(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, repeat: int) -> torch.Tensor:
        padded = bool((mask == 0).any())
        out = self.model(input_ids=ids, attention_mask=mask if padded else None, position_ids=positions,
                         use_cache=True, logits_to_keep=1)
        self.cache = getattr(out, self.cache_arg)
        if repeat > 1:
            self.cache.batch_repeat_interleave(repeat)
        if padded:
            self.mask = torch.ones(self.shape, dtype=torch.long, device=ids.device)
            self.mask[:, : ids.shape[1]] = mask.repeat_interleave(repeat, 0)
        return out.logits[:, -1]

    def select(self, keep: torch.Tensor) -> None:
        """Keep only these batch rows (finished rows leave the batch)."""
        self.cache.batch_select_indices(keep)
        if self.mask is not None:
            self.mask = self.mask[keep]

    def step(self, tokens: torch.Tensor, positions: torch.Tensor, slot: int) -> torch.Tensor:
        mask = None if self.mask is None else self.mask[:, : slot + 1]
        out = self.model(input_ids=tokens[:, None], attention_mask=mask, position_ids=positions[:, None],
                         use_cache=True, **{self.cache_arg: self.cache})
        return out.logits[:, -1]
