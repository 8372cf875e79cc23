"""`evo pretrain`: train a tiny model from scratch on a task's demonstrations."""

from __future__ import annotations

import json

import click

from evo.commands import option_types, params


SFT_CONFIG = "training.sft:SFTConfig"


def sft_option(*decls, **attrs):
    """A flag for the SFTConfig field of the same name, with that field's default."""
    return click.option(*decls, cls=option_types.ConfigOption, config=SFT_CONFIG, **attrs)


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
@click.option("--progress/--no-progress", default=True, show_default=True,
              help="Progress bars on stderr: the training steps, then the held-out evaluation.")
def command(task_name: str, size: str, arch: str, out_dir: str | None, steps: int, decay_steps: int,
            batch_size: int, lr: float,
            pool: int, multi_fraction: float, seed: int, threads: int, context: int | None, save_every: int, half: bool,
            eval_instances: int, samples: int, max_new_tokens: int, temperature: float,
            init_dir: str | None, evaluate_dir: str | None, progress: bool) -> None:
    """Train a tiny model from scratch on TASK's demonstrations; standard output is one JSON
    line with the held-out quality."""
    from evo.commands.streams import output_to_stderr
    from training.pretrain import PretrainRequest, run
    from training.sft import SFTConfig

    config = SFTConfig(steps=steps, decay_steps=decay_steps, batch_size=batch_size, lr=lr, pool=pool, seed=seed,
                       threads=threads, multi_fraction=multi_fraction)
    with output_to_stderr():  # stdout holds the JSON line alone
        result = run(PretrainRequest(
            task_name, config, out=out_dir, size=size, arch=arch, context=context, save_every=save_every, half=half,
            init=init_dir, evaluate=evaluate_dir, eval_instances=eval_instances, samples=samples,
            max_new_tokens=max_new_tokens, temperature=temperature, progress=progress))
    click.echo(json.dumps(result))
