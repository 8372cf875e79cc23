"""`evo pretrain`: a tiny model trained from scratch (or a checkpoint trained on) with a task's
demonstrations (training/sft.py), then its held-out quality; or only the quality of a checkpoint.

    result = run(PretrainRequest("maze", out="runs/warmup"))   # also written to runs/warmup/pretrain.json
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from evo.errors import UserError
from evo.policies.prompt_format import PLAIN, PromptFormat
from training.sft import SFTConfig

BASE_CONTEXT = 512  # the model context unless the task needs more (not tiny.DEFAULT_CONTEXT, the tokenizer's limit)


@dataclass(frozen=True)
class PretrainRequest:
    """What `evo pretrain` was asked: train into `out` (from `init`, else a fresh `size`/`arch`
    model), or only `evaluate` a checkpoint; then sample `eval_instances` held-out instances."""

    task: str
    config: SFTConfig = field(default_factory=SFTConfig)
    out: str | None = None
    size: str = "nano"
    arch: str = "gpt2"
    context: int | None = None  # None: context_for's default
    save_every: int = 0
    half: bool = True
    init: str | None = None  # a directory or a shipped checkpoint's name
    evaluate: str | None = None
    eval_instances: int = 30
    samples: int = 30
    max_new_tokens: int = 80
    temperature: float = 1.0
    progress: bool = True  # progress bars on stderr: training steps, then held-out instances


def run(request: PretrainRequest) -> dict:
    """Train (or load) the model, measure its held-out quality; the figures, as written to OUT/pretrain.json."""
    from evo.policies import resolve_checkpoint
    from training.trainer import get_task

    task, config = get_task(request.task), request.config
    # a directory with config.json and readable weights, or a shipped checkpoint's name (maze-warmup)
    init, evaluate = (None if given is None else str(resolve_checkpoint(given)) for given in (request.init, request.evaluate))
    held_out = task.instances("test", request.eval_instances, seed=config.seed)
    if evaluate is None:
        from training import tiny

        if request.out is None:
            raise UserError("pass --out DIR for the checkpoint (or --evaluate DIR to only evaluate one)")
        if request.size not in tiny.SIZES:
            raise UserError(f"unknown model size {request.size!r}; known: {', '.join(tiny.SIZES)}")
        # the first training instances (drawn again by training: cheap) and the held-out ones
        measured = [*task.instances("train", 20, seed=config.seed), *held_out[:20]]
        context = context_for(task, measured, config.m, request.max_new_tokens, request.context)
        model, tokenizer, result = pretrain(task, request.task, request.size, request.arch, context, config,
                                            Path(request.out), request.save_every, request.half, init,
                                            request.progress)
    else:
        import torch

        from training import models

        torch.set_num_threads(config.threads)
        model, tokenizer = models.load(evaluate)
        result = {"task": request.task, "checkpoint": evaluate, "seed": config.seed}
    if request.eval_instances:
        prompt = PromptFormat.of_checkpoint(evaluate or str(request.out), tokenizer)
        result.update(held_out_quality(model, tokenizer, task, held_out, samples=request.samples, m=config.m,
                                       max_new_tokens=request.max_new_tokens, temperature=request.temperature,
                                       seed=config.seed, prompt_format=prompt, progress=request.progress))
    if request.out is not None and evaluate is None:
        (Path(request.out) / "pretrain.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def record(out: Path, prompt: PromptFormat) -> None:
    """The checkpoint's train_config.json as the search reads it: its prompt format, and one
    program per reply unless asked for more (the warm-up trains both the single- and the
    m-answer template)."""
    from training.config import CONFIG_FILE, PROMPT_RECORD, SET_SIZE

    (Path(out) / CONFIG_FILE).write_text(json.dumps({SET_SIZE: 1, PROMPT_RECORD: prompt.record()}, indent=2) + "\n")


def context_for(task, instances, m: int, max_new_tokens: int, asked: int | None) -> int:
    """The model context for `asked` (None: BASE_CONTEXT, grown in steps of 64 to what the
    longest of `instances`' m-answer prompts plus m answers needs); a clear error when an
    asked context is too small. The tokenizer is character-level: one token per character."""
    needed = 2 + m * max_new_tokens + max((len(task.prompt(i, m)) for i in instances), default=0)
    if asked is None:
        return max(BASE_CONTEXT, -(-needed // 64) * 64)
    if needed > asked:
        raise UserError(f"prompts of {task.name} need a context of about {needed} tokens; pass --context {needed} or more")
    return asked


def held_out_quality(model, tokenizer, task, held_out, *, samples: int, max_new_tokens: int, m: int,
                     temperature: float, seed: int, prompt_format: PromptFormat = PLAIN, progress: bool = False) -> dict:
    """Single-answer quality (`samples` completions per instance), then the m-answer
    template's with a matched pool (samples // m completions of m answers), keys prefixed;
    `progress`: a bar over the instances of both passes."""
    from tqdm import tqdm

    from training.sft import evaluate

    with tqdm(total=2 * len(held_out), desc=f"held-out {task.name}", unit="inst", disable=not progress,
              dynamic_ncols=True) as bar:
        quality = evaluate(model, tokenizer, task, held_out, samples=samples, max_new_tokens=max_new_tokens,
                           temperature=temperature, oracle=True, seed=seed, prompt_format=prompt_format,
                           on_instance=bar.update)
        multi = evaluate(model, tokenizer, task, held_out, samples=max(1, samples // m), m=m,
                         max_new_tokens=m * max_new_tokens, temperature=temperature, oracle=True, seed=seed,
                         prompt_format=prompt_format, on_instance=bar.update)
    quality.update({f"m{m}_{key}": value for key, value in multi.items()
                    if key not in ("instances", "temperature", "oracle_best", "m")})
    return quality


def pretrain(task, task_name: str, size: str, arch: str, context: int, config: SFTConfig, out: Path, save_every: int,
             half: bool, init: str | None = None, progress: bool = True) -> tuple:
    """Train a fresh tiny model (or continue `init`, in the prompt format it records) with a
    progress bar (`progress`) and save it, its prompt format recorded (`record`); returns the model, the
    tokenizer and the training figures."""
    import torch
    from tqdm import tqdm

    from training import models, tiny
    from training.checkpoint import export
    from training.sft import train

    torch.set_num_threads(config.threads)
    if init is None:
        tokenizer = tiny.char_tokenizer()
        model = tiny.new_model(size, arch, tokenizer, context=context, seed=config.seed)
    else:
        model, tokenizer = models.load(init)
    prompt = PromptFormat.of_checkpoint(init, tokenizer) if init is not None else PromptFormat.default(tokenizer)
    started, cpu_started = time.time(), time.process_time()
    with tqdm(total=config.steps, desc=f"pretrain {task_name}", unit="step", disable=not progress) as bar:
        def on_step(step: int, loss: float) -> None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}")
            if save_every and (step + 1) % save_every == 0:
                tiny.save(model, tokenizer, out)

        losses = train(model, tokenizer, task, config, on_step, prompt_format=prompt)
    export(model, tokenizer, out, half=half)
    record(out, prompt)
    return model, tokenizer, {
        "task": task_name, "size": size, "arch": arch, "params": tiny.param_count(model), "steps": config.steps,
        "decay_steps": config.decay_steps or config.steps, "batch_size": config.batch_size, "lr": config.lr,
        "seed": config.seed, "threads": config.threads,
        "train_minutes": round((time.time() - started) / 60, 2),
        "train_cpu_minutes": round((time.process_time() - cpu_started) / 60, 2),
        "final_loss": round(sum(losses[-50:]) / len(losses[-50:]), 4), "out": str(out), "init": init,
    }
