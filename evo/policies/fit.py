"""Whether a spec's prompts can fit a `local:` checkpoint's context, decided from its
config.json and tokenizer before its weights are loaded: a problem the tiny shipped
checkpoints were not trained for fails in a second with what to use instead, not after a
minute of loading with "shorten the prompt"."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from evo import prompts
from evo.errors import UserError
from evo.policies.checkpoints import CHECKPOINTS, resolve_checkpoint, shipped_checkpoints
from evo.program import MarkerError, split
from evo.prompts import ANSWERS_FIELD, Shown


def context_of(directory: Path) -> int | None:
    """The model's context in tokens from its config.json (None when it does not say, or has
    none: the weights check that loads the model reports that)."""
    if not (directory / "config.json").is_file():
        return None
    config = json.loads((directory / "config.json").read_text())
    for key in ("n_positions", "max_position_embeddings", "n_ctx", "max_sequence_length"):
        if isinstance(config.get(key), int):
            return config[key]
    return None


def task_of(directory: Path) -> str:
    """The task a checkpoint was trained on (its train_config.json or pretrain.json), or '?'."""
    from evo.policies.trained_for import recorded_task

    return recorded_task(directory) or "?"


def smallest_prompt(spec) -> str:
    """The shortest prompt a run of `spec` sends: the initial program as the only parent
    (for `continue`, the part of the file before its EVOLVE block, or the spec's head for one answer)."""
    code = spec.problem.program.read_text(encoding="utf-8")
    if spec.prompt.style == "continue" and spec.prompt.head:
        return Path(spec.prompt.head).read_text(encoding="utf-8").replace(ANSWERS_FIELD, "1")
    if spec.prompt.style == "continue":
        try:
            return split(code).head
        except MarkerError:
            return ""
    shown = Shown(code, 0.0, {name: 0.0 for name in spec.problem.objectives})
    return prompts.build(spec.prompt.style, [shown], rng=np.random.default_rng(0), system=spec.prompt.system,
                         objectives=spec.problem.objectives, minimize=spec.problem.minimize).text


def shipped_contexts() -> str:
    """'maze-grpo (maze, 512 tokens), ...' for every shipped checkpoint."""
    return ", ".join(f"{name} ({task_of(CHECKPOINTS / name)}, {context_of(CHECKPOINTS / name)} tokens)"
                     for name in shipped_checkpoints())


# What to use instead, in the words of the command that was refused.
RUN_REMEDY = "an OpenAI-compatible server (--policy 'openai:URL#MODEL;chat') or vllm:PATH"
COMPARE_REMEDY = "an OpenAI-compatible server (--policy NAME='openai:URL#MODEL;chat') or NAME=vllm:PATH"
TRAIN_REMEDY = "--init MODEL_DIR, the Hugging Face directory of a code model (Qwen2.5-Coder, Llama, ...)"


def check(spec, uri: str, remedy: str = RUN_REMEDY) -> None:
    """UserError when `uri` is `local:PATH` and the smallest prompt of `spec` does not fit the
    model's context (other policies: nothing to check here); `remedy`: what the refused
    command should be given instead."""
    scheme, _, rest = uri.partition(":")
    if scheme != "local":
        return
    directory = resolve_checkpoint(rest)
    context = context_of(directory)
    if context is None:
        return
    from evo.policies.local import load_tokenizer
    from evo.policies.prompt_format import PromptFormat

    tokenizer = load_tokenizer(directory)
    tokens = len(PromptFormat.of_checkpoint(directory, tokenizer).encode(tokenizer, [smallest_prompt(spec)])[0])
    if tokens < context:
        return
    raise UserError(
        f"{uri}: the smallest prompt of {spec.path} is {tokens} tokens, more than the model's context of "
        f"{context}; the shipped checkpoints fit only the prompts of the task they were trained on "
        f"({shipped_contexts()}); a problem of your own needs a real model: {remedy}")
