"""`evo train`: RL post-training of a checkpoint with GRPO, VPO or any registered estimator."""

from __future__ import annotations

import json
from pathlib import Path

import click
from click.core import ParameterSource

from evo.commands import option_types, params
from evo.commands.values import parse_options, spec_overrides
from evo.database.config import SearchSettings


TRAIN_CONFIG = "training.config:TrainConfig"
NOT_FLAGS = ("task", "algo", "init", "out", "steps", "options", "vllm_options")  # flags of their own below


def config_option(*decls, **attrs):
    """A flag for the TrainConfig field of the same name, with that field's default."""
    return click.option(*decls, cls=option_types.ConfigOption, config=TRAIN_CONFIG, **attrs)


def list_algos(ctx: click.Context, _param, value: bool) -> None:
    """Print `NAME PROMPT` per estimator (PROMPT: single, set or goal) and exit."""
    if not value or ctx.resilient_parsing:
        return
    from training.advantages import REGISTRY

    for name in sorted(REGISTRY):
        click.echo(f"{name} {REGISTRY[name].prompt}")
    ctx.exit()


@click.command()
@click.option("--task", help="Task family (see `evo tasks`).")
@click.option("--spec", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Train on a problem spec instead: the search's prompts, parser and sandboxed scorer.")
@click.option("--from-run", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="--spec: start from this `evo run` directory's program database (copied into --out).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="--spec: override a spec key, as in `evo run`.")
@click.option("--algo", type=option_types.LazyChoice("training.advantages:REGISTRY"), default=None,
              help="Advantage estimator (default: vpo; vpo_front with --spec).")
@click.option("--list-algos", is_flag=True, expose_value=False, is_eager=True, callback=list_algos,
              help="Print each estimator and the prompt it trains on (single, set or goal), then exit.")
@click.option("--init", type=click.Path(file_okay=False),
              help="Hugging Face directory to start from, or a shipped checkpoint's name (see evo/checkpoints).")
@click.option("--steps", type=click.IntRange(1), help="Total training steps (default: TrainConfig's, 200).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Checkpoint directory.")
@click.option("--resume", is_flag=True, help="Continue the run in --out (to --steps).")
@click.option("--trust-checkpoint", is_flag=True,
              help="--engine trl --resume: load checkpoint files that could run code (DeepSpeed's; only ones you made or trust).")
@config_option("--prompts", type=click.IntRange(1), help="Prompts per step.")
@config_option("--group", type=click.IntRange(1), help="Rollouts per prompt (G).")
@config_option("--answers", type=click.IntRange(1, SearchSettings.MAXIMUM["answers"]),
               help="Answers per rollout of multi-answer algos (`set` in --list-algos); at most 64.")
@config_option("--max-new-tokens", type=click.IntRange(0),
               help="Token budget of a completion (0: 1.5x the task's longest m-answer demonstration).")
@config_option("--temperature", type=params.TEMPERATURE)
@config_option("--top-p", type=params.TOP_P)
@config_option("--lr", type=click.FloatRange(0), help="AdamW learning rate (0: by model size: 2e-4 tiny, 1e-6 full fine-tuning, 1e-5 LoRA).")
@config_option("--weight-decay", type=click.FloatRange(0), help="AdamW weight decay.")
@config_option("--max-grad-norm", type=click.FloatRange(0, min_open=True), help="Gradient clipping norm.")
@config_option("--kl-coef", type=float, help="k3 KL to the --init model.")
@config_option("--entropy-coef", type=click.FloatRange(0), help="Entropy bonus: the loss subtracts this x mean token entropy.")
@config_option("--diversity-coef", type=click.FloatRange(0),
               help="DARLING-style reward: r x (1 + this x mean distance to the group's other answers); single-answer algos.")
@config_option("--score-by-answer/--no-score-by-answer",
               help="Parse a set's answers one by one: a malformed answer scores zero alone (default: the whole set scores zero).")
@config_option("--eps-low", type=float, help="PPO clip below: ratio >= 1 - eps-low.")
@config_option("--eps-high", type=float,
               help="PPO clip above: ratio <= 1 + eps-high (clip-higher: e.g. 0.28, with --ppo-epochs 2 or more).")
@config_option("--ppo-epochs", type=click.IntRange(1),
               help="Optimizer steps per batch of rollouts; from the second on, the PPO clip binds.")
@config_option("--micro-batches", type=click.IntRange(0),
               help="Gradient accumulation chunks (0: micro-batches from the memory plan's token budget).")
@config_option("--memory-gib", type=click.FloatRange(0), help="The memory plan's budget (0: 90% of what the device can give).")
@config_option("--loss-norm", type=click.IntRange(0), help="Summed token losses are divided by rollouts x this (0: --max-new-tokens).")
@config_option("--idle-steps", type=click.IntRange(0),
               help="Stop after this many steps in a row with nothing to learn (nothing valid: all cut off, unparseable, "
                    "failed or repeated; or zero advantage everywhere); 0: never.")
@click.option("--max-empty-steps", hidden=True, expose_value=False, callback=option_types.renamed("--idle-steps"))
@config_option("--duplicates", type=option_types.LazyChoice("training.search_signal:DUPLICATE_RULES"),
               help="--spec: what a duplicate proposal earns (docs/training.md: penalty, worst, score, zero).")
@config_option("--failures", type=option_types.LazyChoice("training.search_signal:FAILURE_RULES"),
               help="--spec: what a failed, unparseable or cut-off proposal earns (floor; zero: a zero vector, unsafe with minimize).")
@config_option("--save-every", type=click.IntRange(1))
@config_option("--snapshot-every", type=click.IntRange(0),
               help="Also keep the weights of every Nth step in OUT/steps/NNNNNN (held-out curves); 0: never.")
@config_option("--bf16/--no-bf16", help="bfloat16 autocast (default: on CUDA for a 16-bit checkpoint; fast on CPUs with AMX).")
@config_option("--weight-dtype", type=option_types.LazyChoice("training.precision:SETTINGS"),
               help="Trained weights: auto (float32 masters for full fine-tuning), float32, or bfloat16 (pure bf16, warned).")
@config_option("--seed", type=int)
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE", help="Estimator option, e.g. K=100, sobol=True, k=4.")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(1), help="torch CPU threads.")
@click.option("--progress/--no-progress", default=True, show_default=True)
@config_option("--rollouts", type=option_types.LazyChoice("training.config:ROLLOUTS"),
               help="Sample with the in-process sampler or vLLM's engine (weights pushed in after each sync).")
@config_option("--sync-every", type=click.IntRange(1), help="--rollouts vllm: optimizer steps between weight syncs.")
@config_option("--tis-cap", type=click.FloatRange(0),
               help="--rollouts vllm: truncated importance sampling, each token's policy gradient x "
                    "min(exp(logp_trainer - logp_vllm), this); 0: off, else >= 1 (2 is veRL's usual).")
@config_option("--vllm-sleep/--no-vllm-sleep",
               help="--rollouts vllm: vLLM's engine sleeps through each update, its GPU memory the trainer's "
                    "(default: on CUDA; vLLM on CPU has no sleep mode).")
@click.option("--vllm-option", "vllm_options", multiple=True, metavar="KEY=VALUE", help="vLLM engine option, e.g. gpu_memory_utilization=0.4.")
@click.option("--engine", type=click.Choice(["ours", "trl"]), default="ours", show_default=True,
              help="The project's trainer, or TRL's GRPOTrainer with a set-score reward (accelerate/DeepSpeed/FSDP).")
@click.option("--use-vllm", is_flag=True, help="--engine trl: TRL generates with vLLM (colocate by default; --vllm-option mode=server, enable_sleep_mode=True).")
@config_option("--device", type=option_types.LazyChoice("training.models:DEVICES"))
@config_option("--chat/--no-chat", help="Apply the tokenizer's chat template (default: as --init's train_config.json "
                                          "records, else when the tokenizer has one).")
@config_option("--system", help="The chat template's system message before every prompt (default: as --init records, else none).")
@config_option("--gradient-checkpointing/--no-gradient-checkpointing",
               help="Recompute activations in the backward (default: when the memory plan needs it).")
@config_option("--lora-rank", type=click.IntRange(0), help="Train LoRA adapters of this rank (peft); 0: all weights.")
@config_option("--lora-alpha", type=float)
def command(init, steps, out, resume, trust_checkpoint, options, vllm_options, threads, progress, engine, use_vllm, spec, from_run, sets,
            **settings) -> None:
    """RL-train a checkpoint on a task family (--task) or on a problem spec (--spec); writes a
    Hugging Face directory, metrics.jsonl and trainer state. Standard output holds one line, a JSON summary."""
    from evo.commands.streams import output_to_stderr
    from training.directory import TrainRequest, train

    settings.update(options=parse_options(options), vllm_options=parse_options(vllm_options))
    source = click.get_current_context().get_parameter_source
    if resume:  # only the flags given on the command line, to compare with the stored settings
        settings = {name: value for name, value in settings.items() if source(name) == ParameterSource.COMMANDLINE}
    given = frozenset(name for name in settings if source(name) not in (None, ParameterSource.DEFAULT))
    with output_to_stderr():  # stdout holds the JSON summary alone
        config, records = train(TrainRequest(
            Path(out), settings, resume=resume, init=init, steps=steps, spec=spec, from_run=from_run,
            overrides=spec_overrides({}, sets), engine=engine, use_vllm=use_vllm, progress=progress, threads=threads,
            given=given, trust_checkpoint=trust_checkpoint))
    last = records[-1] if records else {}
    click.echo(json.dumps({"out": config.out, "algo": config.algo, "steps": config.steps,
                           **{k: last[k] for k in ("scalar", "best_in_set", "diversity") if k in last}}))
