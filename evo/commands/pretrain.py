"""`evo pretrain`: train a tiny model from scratch on a task's demonstrations."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from evo.errors import UserError


def _task(name: str):
    import tasks

    try:
        return tasks.get(name)
    except tasks.UnknownTask as error:
        raise UserError(str(error)) from None


def save_checkpoint(model, tokenizer, out: Path, half: bool) -> None:
    """Save the checkpoint; with `half`, the weights are stored as float16 (half the bytes)
    but config.json keeps float32, so `from_pretrained(dtype="auto")` computes in float32."""
    from evo import tiny

    tiny.save(model.half() if half else model, tokenizer, out)
    model.float()
    config = json.loads((out / "config.json").read_text())
    for key in ("dtype", "torch_dtype"):
        if key in config:
            config[key] = "float32"
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


@click.command()
@click.option("--task", "task_name", required=True, help="Task family (see `evo tasks`).")
@click.option("--size", default="nano", show_default=True, help="Tiny model size: nano (~1M) or micro (~5M).")
@click.option("--arch", default="gpt2", show_default=True, type=click.Choice(["gpt2", "llama"]))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Checkpoint directory.")
@click.option("--steps", default=2000, show_default=True, type=click.IntRange(1))
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(1))
@click.option("--lr", default=2e-3, show_default=True, type=float)
@click.option("--pool", default=3000, show_default=True, type=click.IntRange(1), help="Training instances.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--threads", default=2, show_default=True, type=click.IntRange(1), help="torch CPU threads.")
@click.option("--context", default=512, show_default=True, type=click.IntRange(64), help="Model context (tokens).")
@click.option("--eval-instances", default=50, show_default=True, type=click.IntRange(0))
@click.option("--samples", default=30, show_default=True, type=click.IntRange(1), help="Samples per held-out instance.")
@click.option("--max-new-tokens", default=200, show_default=True, type=click.IntRange(1))
@click.option("--multi-fraction", default=0.5, show_default=True, type=click.FloatRange(0, 1),
              help="Share of demonstrations in the m-answer template.")
@click.option("--save-every", default=0, show_default=True, type=click.IntRange(0),
              help="Also save the checkpoint every N steps (0: only at the end).")
@click.option("--half/--no-half", default=True, show_default=True, help="Save the weights as float16.")
def command(task_name: str, size: str, arch: str, out_dir: str, steps: int, batch_size: int, lr: float,
            pool: int, seed: int, threads: int, context: int, eval_instances: int, samples: int,
            max_new_tokens: int, multi_fraction: float, save_every: int, half: bool) -> None:
    """Train a tiny model from scratch on TASK's demonstrations; the last line is JSON
    with the held-out quality."""
    import torch
    from tqdm import tqdm

    from evo import tiny
    from training.sft import SFTConfig, evaluate, train

    task = _task(task_name)
    if size not in tiny.SIZES:
        raise UserError(f"unknown model size {size!r}; known: {', '.join(tiny.SIZES)}")
    config = SFTConfig(steps=steps, batch_size=batch_size, lr=lr, pool=pool, seed=seed, threads=threads,
                       multi_fraction=multi_fraction)
    torch.set_num_threads(threads)
    tokenizer = tiny.char_tokenizer()
    model = tiny.new_model(size, arch, tokenizer, context=context, seed=seed)
    out = Path(out_dir)
    started, cpu_started = time.time(), time.process_time()
    with tqdm(total=steps, desc=f"pretrain {task_name}", unit="step") as bar:
        def on_step(step: int, loss: float) -> None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}")
            if save_every and (step + 1) % save_every == 0:
                tiny.save(model, tokenizer, out)

        losses = train(model, tokenizer, task, config, on_step)
    train_seconds, cpu_seconds = time.time() - started, time.process_time() - cpu_started
    save_checkpoint(model, tokenizer, out, half)
    oracle = getattr(task, "oracle_best", None)
    quality = evaluate(model, tokenizer, task, task.instances("test", eval_instances, seed=seed),
                       samples=samples, max_new_tokens=max_new_tokens, oracle=oracle) if eval_instances else {}
    result = {
        "task": task_name, "size": size, "arch": arch, "params": tiny.param_count(model), "steps": steps,
        "batch_size": batch_size, "seed": seed, "threads": threads, "train_minutes": round(train_seconds / 60, 2),
        "train_cpu_minutes": round(cpu_seconds / 60, 2),
        "final_loss": round(sum(losses[-50:]) / len(losses[-50:]), 4), "out": str(out), **quality,
    }
    (out / "pretrain.json").write_text(json.dumps(result, indent=1) + "\n")
    click.echo(json.dumps(result))
