"""`evo train`: RL post-training of a checkpoint with GRPO, VPO or any registered estimator."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import click

from evo.commands import params
from evo.errors import UserError


TRAIN_CONFIG = "training.config:TrainConfig"
NOT_FLAGS = ("task", "algo", "init", "out", "steps", "options", "vllm_options")  # flags of their own below


def config_option(*decls, **attrs):
    """A flag for the TrainConfig field of the same name, with that field's default."""
    return click.option(*decls, cls=params.ConfigOption, config=TRAIN_CONFIG, **attrs)


def list_algos(ctx: click.Context, _param, value: bool) -> None:
    """Print `NAME PROMPT` per estimator (PROMPT: single, set or goal) and exit."""
    if not value or ctx.resilient_parsing:
        return
    from training.advantages import REGISTRY

    for name in sorted(REGISTRY):
        click.echo(f"{name} {REGISTRY[name].prompt}")
    ctx.exit()


def parse_options(pairs: tuple[str, ...]) -> dict:
    """`KEY=VALUE` estimator options; values are Python literals (100, 0.5, True)."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--option expects KEY=VALUE, got {pair!r}")
        try:
            options[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            options[key] = value
    return options


def build_config(out: Path, resume: bool, init: str | None, steps: int | None, settings: dict):
    from training.checkpoint import has_state
    from training.config import CONFIG_FILE, TrainConfig

    if resume:
        if not has_state(out) or not (out / CONFIG_FILE).exists():
            raise UserError(f"{out} holds no trainer checkpoint to resume (run without --resume first)")
        config = TrainConfig.load(out)
        return dataclasses.replace(config, out=str(out), steps=steps or config.steps)  # the run may have moved
    if has_state(out):
        raise UserError(f"{out} already holds a training run; pass --resume to continue it or choose another --out")
    if init is None or settings["task"] is None:
        raise UserError("--task and --init are required (unless --resume)")
    try:
        return TrainConfig(init=init, out=str(out), **({"steps": steps} if steps else {}), **settings)
    except ValueError as error:
        raise UserError(str(error)) from None


def train_with(engine: str, config, *, resume: bool, use_vllm: bool, progress: bool) -> list[dict]:
    """Run the project's trainer (`ours`) or TRL's GRPOTrainer (`trl`) on `config`."""
    if engine == "trl":
        if resume:
            raise UserError("--engine trl does not resume a run; start a new one with --init set to the last checkpoint")
        from training.integrations.trl import run as run_trl

        return run_trl(config, use_vllm=use_vllm, progress=progress)
    if use_vllm:
        raise UserError("--use-vllm is for --engine trl; the project's trainer takes --rollouts vllm")
    from training.trainer import run

    try:
        return run(config, resume=resume, progress=progress)
    except TypeError as error:  # an estimator option it does not take
        raise UserError(f"bad --option for {config.algo}: {error}") from None


@click.command()
@click.option("--task", help="Task family (see `evo tasks`).")
@click.option("--algo", type=params.LazyChoice("training.advantages:REGISTRY"), default="vpo", show_default=True,
              help="Advantage estimator.")
@click.option("--list-algos", is_flag=True, expose_value=False, is_eager=True, callback=list_algos,
              help="Print each estimator and the prompt it trains on (single, set or goal), then exit.")
@click.option("--init", type=click.Path(file_okay=False), help="Hugging Face directory to start from.")
@click.option("--steps", type=click.IntRange(1), help="Total training steps (default: TrainConfig's, 200).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Checkpoint directory.")
@click.option("--resume", is_flag=True, help="Continue the run in --out (to --steps).")
@config_option("--prompts", type=click.IntRange(1), help="Prompts per step.")
@config_option("--group", type=click.IntRange(1), help="Rollouts per prompt (G).")
@config_option("--answers", type=click.IntRange(1), help="Answers per rollout of multi-answer algos (`set` in --list-algos).")
@config_option("--max-new-tokens", type=params.MAX_NEW_TOKENS)
@config_option("--temperature", type=params.TEMPERATURE)
@config_option("--top-p", type=params.TOP_P)
@config_option("--lr", type=float)
@config_option("--weight-decay", type=click.FloatRange(0), help="AdamW weight decay.")
@config_option("--max-grad-norm", type=click.FloatRange(0, min_open=True), help="Gradient clipping norm.")
@config_option("--kl-coef", type=float, help="k3 KL to the --init model.")
@config_option("--entropy-coef", type=click.FloatRange(0), help="Entropy bonus: the loss subtracts this x mean token entropy.")
@config_option("--diversity-coef", type=click.FloatRange(0),
               help="DARLING-style reward: r x (1 + this x mean distance to the group's other answers); single-answer algos.")
@config_option("--score-by-answer/--no-score-by-answer",
               help="Parse a set's answers one by one: a malformed answer scores zero alone (default: the whole set scores zero).")
@config_option("--eps-low", type=float, help="PPO clip below: ratio >= 1 - eps-low.")
@config_option("--eps-high", type=float, help="PPO clip above: ratio <= 1 + eps-high (clip-higher: e.g. 0.28).")
@config_option("--ppo-epochs", type=click.IntRange(1))
@config_option("--micro-batches", type=click.IntRange(1), help="Gradient accumulation chunks.")
@config_option("--loss-norm", type=click.IntRange(0), help="Summed token losses are divided by rollouts x this (0: --max-new-tokens).")
@config_option("--save-every", type=click.IntRange(1))
@config_option("--snapshot-every", type=click.IntRange(0),
               help="Also keep the weights of every Nth step in OUT/steps/NNNNNN (held-out curves); 0: never.")
@config_option("--bf16/--no-bf16", help="bfloat16 autocast (fast on CPUs with AMX or AVX512-BF16).")
@config_option("--seed", type=int)
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE", help="Estimator option, e.g. K=100, sobol=True, k=4.")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(1), help="torch CPU threads.")
@click.option("--progress/--no-progress", default=True, show_default=True)
@config_option("--rollouts", type=params.LazyChoice("training.config:ROLLOUTS"),
               help="Sample with the in-process sampler or vLLM's engine (weights pushed in after each sync).")
@config_option("--sync-every", type=click.IntRange(1), help="--rollouts vllm: optimizer steps between weight syncs.")
@click.option("--vllm-option", "vllm_options", multiple=True, metavar="KEY=VALUE", help="vLLM engine option, e.g. gpu_memory_utilization=0.4.")
@click.option("--engine", type=click.Choice(["ours", "trl"]), default="ours", show_default=True,
              help="The project's trainer, or TRL's GRPOTrainer with a set-score reward (accelerate/DeepSpeed/FSDP).")
@click.option("--use-vllm", is_flag=True, help="--engine trl: TRL generates with vLLM (colocate mode).")
@config_option("--device", type=params.LazyChoice("training.models:DEVICES"))
@config_option("--chat/--no-chat", help="Apply the tokenizer's chat template (default: when it has one).")
@config_option("--gradient-checkpointing", is_flag=True, help="Recompute activations in the backward (large models).")
@config_option("--lora-rank", type=click.IntRange(0), help="Train LoRA adapters of this rank (peft); 0: all weights.")
@config_option("--lora-alpha", type=float)
def command(init, steps, out, resume, options, vllm_options, threads, progress, engine, use_vllm, **settings) -> None:
    """RL-train a checkpoint; writes a Hugging Face directory, metrics.jsonl and trainer state.
    The last line printed is a JSON summary."""
    import torch

    settings.update(options=parse_options(options), vllm_options=parse_options(vllm_options))
    if init is not None and not (Path(init) / "config.json").exists():
        raise UserError(f"--init {init} is not a Hugging Face model directory (no config.json)")
    config = build_config(Path(out), resume, init, steps, settings)
    torch.set_num_threads(threads)
    records = train_with(engine, config, resume=resume, use_vllm=use_vllm, progress=progress)
    last = records[-1] if records else {}
    click.echo(json.dumps({"out": config.out, "algo": config.algo, "steps": config.steps,
                           **{k: last[k] for k in ("scalar", "best_in_set", "diversity") if k in last}}))
