"""`evo pretrain`: train a tiny model from scratch on a task's demonstrations."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from evo.commands import params
from evo.errors import UserError


SFT_CONFIG = "training.sft:SFTConfig"


def sft_option(*decls, **attrs):
    """A flag for the SFTConfig field of the same name, with that field's default."""
    return click.option(*decls, cls=params.ConfigOption, config=SFT_CONFIG, **attrs)


BASE_CONTEXT = 512  # the model context unless the task needs more (not tiny.DEFAULT_CONTEXT, the tokenizer's limit)


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


def _task(name: str):
    import tasks

    try:
        return tasks.get(name)
    except tasks.UnknownTask as error:
        raise UserError(str(error)) from None


def held_out_quality(model, tokenizer, task, held_out, *, samples: int, max_new_tokens: int, m: int,
                     temperature: float, seed: int) -> dict:
    """Single-answer quality (`samples` completions per instance), then the m-answer
    template's with a matched pool (samples // m completions of m answers), keys prefixed."""
    from training.sft import evaluate

    quality = evaluate(model, tokenizer, task, held_out, samples=samples, max_new_tokens=max_new_tokens,
                       temperature=temperature, oracle=True, seed=seed)
    multi = evaluate(model, tokenizer, task, held_out, samples=max(1, samples // m), m=m,
                     max_new_tokens=m * max_new_tokens, temperature=temperature, oracle=True, seed=seed)
    quality.update({f"m{m}_{key}": value for key, value in multi.items()
                    if key not in ("instances", "temperature", "oracle_best", "m")})
    return quality


def pretrain(task, task_name: str, size: str, arch: str, context: int, config, out: Path, save_every: int,
             half: bool, init: str | None = None) -> tuple:
    """Train a fresh tiny model (or continue `init`) with a progress bar and save it;
    returns the model, the tokenizer and the training figures."""
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
    started, cpu_started = time.time(), time.process_time()
    with tqdm(total=config.steps, desc=f"pretrain {task_name}", unit="step") as bar:
        def on_step(step: int, loss: float) -> None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}")
            if save_every and (step + 1) % save_every == 0:
                tiny.save(model, tokenizer, out)

        losses = train(model, tokenizer, task, config, on_step)
    export(model, tokenizer, out, half=half)
    return model, tokenizer, {
        "task": task_name, "size": size, "arch": arch, "params": tiny.param_count(model), "steps": config.steps,
        "decay_steps": config.decay_steps or config.steps, "batch_size": config.batch_size, "lr": config.lr,
        "seed": config.seed, "threads": config.threads,
        "train_minutes": round((time.time() - started) / 60, 2),
        "train_cpu_minutes": round((time.process_time() - cpu_started) / 60, 2),
        "final_loss": round(sum(losses[-50:]) / len(losses[-50:]), 4), "out": str(out), "init": init,
    }


@click.command()
@click.option("--task", "task_name", required=True, help="Task family (see `evo tasks`).")
@click.option("--size", default="nano", show_default=True, help="Tiny model size: nano (~1M), nano8 (nano with 8 heads), micro (~5M) or small (~25M).")
@click.option("--arch", default="gpt2", show_default=True, type=click.Choice(["gpt2", "llama"]))
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Checkpoint directory (required to train).")
@sft_option("--steps", type=click.IntRange(1))
@sft_option("--decay-steps", type=click.IntRange(0),
              help="Length of the cosine learning-rate schedule (0: --steps).")
@sft_option("--batch-size", type=click.IntRange(1))
@sft_option("--lr", type=float)
@sft_option("--pool", type=click.IntRange(1), help="Training instances.")
@sft_option("--multi-fraction", type=click.FloatRange(0, 1),
              help="Share of demonstrations in the m-answer template.")
@sft_option("--seed", type=int)
@sft_option("--threads", type=click.IntRange(1), help="torch CPU threads.")
@click.option("--context", type=click.IntRange(64),
              help="Model context (tokens). Default: 512, or what TASK's prompts and answers need, rounded up to 64.")
@click.option("--save-every", default=0, show_default=True, type=click.IntRange(0),
              help="Also save the checkpoint every N steps (0: only at the end).")
@click.option("--half/--no-half", default=True, show_default=True, help="Store the weights as float16.")
@click.option("--eval-instances", default=30, show_default=True, type=click.IntRange(0))
@click.option("--samples", default=30, show_default=True, type=click.IntRange(1), help="Samples per held-out instance.")
@click.option("--max-new-tokens", default=80, show_default=True, type=click.IntRange(1),
              help="Tokens per answer when sampling for the held-out evaluation.")
@click.option("--temperature", default=1.0, show_default=True, type=params.TEMPERATURE, help="Evaluation sampling temperature.")
@click.option("--init", "init_dir", type=click.Path(file_okay=False),
              help="Continue training this checkpoint (a directory or a shipped name) instead of a fresh model.")
@click.option("--evaluate", "evaluate_dir", type=click.Path(file_okay=False),
              help="Only evaluate this checkpoint (a directory or a shipped name; no training).")
def command(task_name: str, size: str, arch: str, out_dir: str | None, steps: int, decay_steps: int,
            batch_size: int, lr: float,
            pool: int, multi_fraction: float, seed: int, threads: int, context: int | None, save_every: int, half: bool,
            eval_instances: int, samples: int, max_new_tokens: int, temperature: float,
            init_dir: str | None, evaluate_dir: str | None) -> None:
    """Train a tiny model from scratch on TASK's demonstrations; the last line is JSON
    with the held-out quality."""
    task = _task(task_name)
    from evo.policies import resolve_checkpoint
    from training.sft import SFTConfig

    # a directory with config.json and readable weights, or a shipped checkpoint's name (maze-warmup)
    init_dir, evaluate_dir = (None if given is None else str(resolve_checkpoint(given)) for given in (init_dir, evaluate_dir))

    config = SFTConfig(steps=steps, decay_steps=decay_steps, batch_size=batch_size, lr=lr, pool=pool, seed=seed,
                       threads=threads, multi_fraction=multi_fraction)
    held_out = task.instances("test", eval_instances, seed=seed)
    if evaluate_dir is None:
        from training import tiny

        if out_dir is None:
            raise UserError("pass --out DIR for the checkpoint (or --evaluate DIR to only evaluate one)")
        if size not in tiny.SIZES:
            raise UserError(f"unknown model size {size!r}; known: {', '.join(tiny.SIZES)}")
        # the first training instances (drawn again by training: cheap) and the held-out ones
        measured = [*task.instances("train", 20, seed=seed), *held_out[:20]]
        context = context_for(task, measured, config.m, max_new_tokens, context)
        model, tokenizer, result = pretrain(task, task_name, size, arch, context, config, Path(out_dir),
                                            save_every, half, init_dir)
    else:
        import torch

        from training import models

        torch.set_num_threads(threads)
        model, tokenizer = models.load(evaluate_dir)
        result = {"task": task_name, "checkpoint": evaluate_dir, "seed": seed}
    if eval_instances:
        result.update(held_out_quality(model, tokenizer, task, held_out, samples=samples, m=config.m,
                                       max_new_tokens=max_new_tokens, temperature=temperature, seed=seed))
    if out_dir is not None and evaluate_dir is None:
        (Path(out_dir) / "pretrain.json").write_text(json.dumps(result, indent=1) + "\n")
    click.echo(json.dumps(result))
