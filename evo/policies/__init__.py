"""Policies: `load(uri)` returns a Policy (see evo/policies/base.py).

    local:PATH          a Hugging Face causal-LM directory, or the name of a shipped checkpoint
    openai:URL#MODEL    an OpenAI-compatible server (options: ;chat ;logprobs ;token_ids ;concurrency=N ;timeout=S ;retries=N
                        ;backoff=S ;max_backoff=S; ranges in evo/policies/openai.py RANGES; ;train=PATH: a
                        `vllm serve` of PATH that `evo run --train` trains, evo/policies/served.py)
    vllm:PATH           vLLM's in-process engine (needs the `vllm` extra)
    mutate:             random AST edits of the parent program (options: mutate:max_edits=N,scale=X)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from evo.database.config import SearchSettings
from evo.errors import UserError
from evo.policies.base import Completion, Policy, Trainable
from evo.policies.checkpoints import CHECKPOINTS, SPEC_TASK, check_weights, resolve_checkpoint, shipped_checkpoints

SCHEMES = ("local", "openai", "vllm", "mutate")


MAX_ANSWERS = SearchSettings.MAXIMUM["answers"]  # programs per reply a checkpoint may say it writes


def _train_config(uri: str) -> tuple[Path, object] | None:
    """(the path, its parsed JSON, or the error reading it) of the train_config.json of `uri`'s
    checkpoint; None without a checkpoint or a file."""
    import json

    path = checkpoint_of(uri)
    config = None if path is None else resolve_checkpoint(path) / "train_config.json"
    if config is None or not config.is_file():
        return None
    try:
        return config, json.loads(config.read_text())
    except (OSError, ValueError) as error:
        return config, error


def trained_answers(uri: str) -> int:
    """Programs per completion the checkpoint of a `local:` / `vllm:` policy (or of an `openai:`
    one's `;train=PATH`) was trained to write (its train_config.json's "set_size"), else 1."""
    found = _train_config(uri)
    if found is None:
        return 1
    config, data = found
    if isinstance(data, Exception):
        raise UserError(f"{config}: unreadable training config ({data}); restore it, or give --answers M")
    m = data.get("set_size") if isinstance(data, dict) else None
    if m is None:
        raise UserError(f"{config}: records no set_size (the answers per completion the model was trained to write); "
                        'add "set_size": M to it (1 unless it was trained on sets of M answers), or give --answers M')
    if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= MAX_ANSWERS:
        raise UserError(f"{config}: set_size must be an integer in 1..{MAX_ANSWERS}, found {m!r}; fix it, or give --answers M")
    return m


def trained_tokens(uri: str) -> int | None:
    """Tokens per answer the checkpoint of `uri` was trained to write in (its train_config.json's
    max_new_tokens over its set_size, rounded up), else None: no checkpoint, no record, or one
    trained on a spec (`evo train --spec`), whose budget was the search's own rule
    (evo.loop.auto_tokens at its first step), which the search goes on applying itself."""
    found = _train_config(uri)
    data = found[1] if found is not None else None  # an unreadable one: trained_answers names it where it matters
    budget, m = (data.get("max_new_tokens"), data.get("set_size", 1)) if isinstance(data, dict) else (None, 1)
    if type(budget) is not int or type(m) is not int or budget < 1 or m < 1:  # not bool, not a float
        return None
    if isinstance(data, dict) and str(data.get("task", "")).startswith(SPEC_TASK):
        return None
    return -(-budget // m)


def trained_budgets(named: Mapping[str, str]) -> tuple[tuple[str, int], ...]:
    """(name, trained_tokens) for each policy (name -> URI) whose checkpoint records a budget: a
    run's LoopConfig.policy_tokens."""
    return tuple((name, t) for name, uri in named.items() if (t := trained_tokens(uri)) is not None)


def checkpoint_of(uri: str) -> str | None:
    """The checkpoint directory a policy URI names (`local:PATH`, `vllm:PATH`, `openai:...;train=PATH`), else None."""
    scheme, _, rest = uri.partition(":")
    if scheme in ("local", "vllm"):
        return rest
    if scheme == "openai":
        from evo.policies.openai import parse_uri

        return parse_uri(rest).train or None
    return None


def answers_for(uri: str, asked: int = 0) -> int:
    """Programs per reply for the policy at `uri`: `asked` when > 0 ([search] answers, --answers),
    else what its checkpoint was trained for."""
    return asked if asked > 0 else trained_answers(uri)


def prompt_style(uri: str, style: str) -> str:
    """The prompt style the policy at `uri` is asked in: the spec's `style`, except that a policy
    that edits the program it is shown (its class says `edits_shown_program`: `mutate:`) gets
    `full` prompts where the spec's are `continue` (a continuation shows only a prefix of the
    parent's block)."""
    edits = getattr(policy_class(uri), "edits_shown_program", False)
    return "full" if style == "continue" and edits else style


def policy_class(uri: str) -> type:
    """The class `load(uri)` builds (nothing is loaded or started)."""
    scheme, sep, rest = uri.partition(":")
    if not sep or scheme not in SCHEMES:
        raise UserError(f"unknown policy {uri!r}; use local:PATH, openai:URL#MODEL, vllm:PATH or mutate:")
    if scheme == "local":
        from evo.policies.local import LocalPolicy

        return LocalPolicy
    if scheme == "openai":
        from evo.policies.openai import OpenAIPolicy, parse_uri
        from evo.policies.served import ServedPolicy

        return ServedPolicy if parse_uri(rest).train else OpenAIPolicy
    if scheme == "vllm":
        from evo.policies.vllm_engine import VLLMPolicy

        return VLLMPolicy
    from evo.policies.mutate import MutatePolicy

    return MutatePolicy


def trainable(uri: str) -> bool:
    """Whether the policy at `uri` is one this process can train (evo.policies.base.Trainable)."""
    return issubclass(policy_class(uri), Trainable)


def set_threads(threads: int | None, uris) -> None:
    """A local model shares the CPU with the evaluations: oversubscribed torch threads cost
    several times their worth on a small machine (measured: 1 thread 5x faster on 2 cores).
    With a `local:` policy among `uris`: `threads`, else half the cores."""
    if not any(uri.startswith("local:") for uri in uris):
        return
    import os

    import torch

    torch.set_num_threads(threads or max(1, (os.cpu_count() or 2) // 2))


def load(uri: str, **options) -> Policy:
    """Build the policy a URI names; `options` go to its constructor (e.g. device="cpu")."""
    policy_class(uri)  # a URI of no known kind: one line
    scheme, _, rest = uri.partition(":")
    if scheme == "local":
        from evo.policies.local import LocalPolicy

        return LocalPolicy(resolve_checkpoint(rest), **options)
    if scheme == "openai":
        from evo.policies.openai import OpenAIPolicy, parse_uri
        from evo.policies.served import ServedPolicy

        config = parse_uri(rest)
        policy = (ServedPolicy if config.train else OpenAIPolicy)(config)
        policy.check()
        return policy
    if scheme == "vllm":
        from evo.policies.vllm_engine import VLLMPolicy

        return VLLMPolicy(resolve_checkpoint(rest), **options)
    from evo.policies.mutate import MutatePolicy, parse_options

    return MutatePolicy(parse_options(rest))


__all__ = ["CHECKPOINTS", "Completion", "Policy", "Trainable", "check_weights", "load", "resolve_checkpoint", "shipped_checkpoints"]
