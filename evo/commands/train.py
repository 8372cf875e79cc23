"""`evo train`: RL post-training of a checkpoint with GRPO, VPO or any registered estimator."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from evo.commands import params
from evo.commands.params import parse_options, spec_overrides
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


def holds_run(out: Path, engine: str) -> bool:
    """Whether `out` holds a run `engine` can resume: the project's trainer state, or a TRL checkpoint."""
    from training.checkpoint import has_state

    if engine == "trl":
        from training.integrations.trl import last_checkpoint

        return last_checkpoint(out) is not None
    return has_state(out)


def build_config(out: Path, resume: bool, init: str | None, steps: int | None, settings: dict, engine: str = "ours"):
    from evo.policies import check_weights
    from training.checkpoint import recover
    from training.config import CONFIG_FILE, TrainConfig

    if resume:
        recover(out)  # a save killed half-way: finished or dropped, never weights of one step with state of another
        if not holds_run(out, engine) and unfinished_start(out):
            raise UserError(f"{out} holds a spec training that stopped before its first checkpoint: run the same "
                            "command without --resume to start its training again (its program database is kept)")
        if not holds_run(out, engine) or not (out / CONFIG_FILE).exists():
            raise UserError(f"{out} holds no trainer checkpoint to resume (run without --resume first)")
        config = TrainConfig.load(out)
        check_weights(out)
        refuse_changes(config, settings)
        return dataclasses.replace(config, out=str(out), steps=steps or config.steps)  # the run may have moved
    if holds_run(out, engine):
        raise UserError(f"{out} already holds a training run; pass --resume to continue it or choose another --out")
    if init is None or settings["task"] is None:
        raise UserError("--task (or --spec) and --init are required (unless --resume)")
    check_weights(Path(init))
    try:
        given: dict[str, Any] = {"steps": steps} if steps else {}
        config = TrainConfig(init=init, out=str(out), **given, **settings)
    except ValueError as error:
        raise UserError(str(error)) from None
    check_clip(config)
    return config


def check_clip(config) -> None:
    """Refuse clip bounds that cannot act: with one PPO epoch, a step's only update is on-policy
    (the ratio is exactly 1), so --eps-low/--eps-high would change nothing."""
    defaults = {f.name: f.default for f in dataclasses.fields(config) if f.name in ("eps_low", "eps_high")}
    if config.ppo_epochs == 1 and any(getattr(config, name) != value for name, value in defaults.items()):
        raise UserError("--eps-low/--eps-high have no effect with --ppo-epochs 1 (each step's one update is on-policy: "
                        "the ratio is 1 and the clip never binds); add --ppo-epochs 2 or more")


def refuse_changes(config, given: dict) -> None:
    """A resumed run keeps its settings: a flag given with --resume must repeat the stored value."""
    for name, value in given.items():
        stored = getattr(config, name, value)
        if value != stored:
            flag = "--" + name.replace("_", "-")
            raise UserError(f"{flag} {value!r} differs from the run's {stored!r}; a resumed run keeps its settings "
                            "(drop the flag, or start a new --out with --init set to this run)")


def train_with(engine: str, config, *, resume: bool, use_vllm: bool, progress: bool, given: set[str] | None = None,
               task=None) -> list[dict]:
    """Run the project's trainer (`ours`) or TRL's GRPOTrainer (`trl`) on `config` (and `task`,
    when it is not a registered family: a problem spec's); `given`: the flags set on the
    command line (TRL refuses those it cannot honour)."""
    if engine == "trl" and task is not None:
        raise UserError("--spec trains with the project's trainer; drop --engine trl")
    if engine == "trl":
        from training.integrations.trl import run as run_trl

        return run_trl(config, use_vllm=use_vllm, progress=progress, given=given, resume=resume)
    if use_vllm:
        raise UserError("--use-vllm is for --engine trl; the project's trainer takes --rollouts vllm")
    from training.trainer import run

    return run(config, resume=resume, progress=progress, task=task)  # its options were checked with the config


def spec_source(spec: Path | None, from_run: Path | None, sets: tuple[str, ...], settings: dict, out: Path):
    """The SpecSource of `--spec` (None without it); fills `task` and the default `algo`."""
    if spec is None:
        if from_run is not None or sets:
            raise UserError("--from-run and --set go with --spec PROBLEM.toml")
        settings["algo"] = settings["algo"] or "vpo"
        return None
    if settings["task"] is not None:
        raise UserError("give --task (a built-in family) or --spec (a problem spec), not both")
    from evo.database import DB_FILE
    from training.advantages import entry
    from training.spec_task import SpecSource

    algo = settings["algo"] or "vpo_archive"
    if entry(algo).prompt != "single":
        raise UserError(f"{algo} needs a {entry(algo).prompt}-answer prompt; a spec's prompts ask for one program: "
                        "use vpo_archive or another single-answer estimator (evo train --list-algos)")

    source = SpecSource(str(spec.resolve()), spec_overrides({}, sets), None if from_run is None else str(from_run.resolve()))
    source.load()  # a bad spec or override: one line, before anything is written
    if (out / DB_FILE).exists() and not unfinished_start(out):
        raise UserError(f"{out} already holds a program database ({DB_FILE}); pass --resume or choose another --out")
    settings["task"], settings["algo"] = source.task_name, algo
    return source


def unfinished_start(out: Path) -> bool:
    """Whether `out` holds a spec training killed or refused before its first checkpoint: the
    same command starts its training again, over the program database it made."""
    from training.checkpoint import has_state
    from training.spec_task import SOURCE_FILE

    return (out / SOURCE_FILE).is_file() and not has_state(out)


def open_spec_task(config, source, resume: bool):
    """The spec's training task over the database in --out (None for a built-in task family):
    on --resume the one the run was started on; on a fresh start `source`'s, and a refusal
    while opening it removes what the start wrote."""
    from training.config import CONFIG_FILE
    from training.spec_task import DB_FILES, SOURCE_FILE, TASK_PREFIX, SpecSource

    out = Path(config.out)
    if resume:
        if not (out / SOURCE_FILE).exists() and not config.task.startswith(TASK_PREFIX):
            return None  # a built-in task family
        source = SpecSource.read(out)
        if config.task != source.task_name:
            raise UserError(f"{out / CONFIG_FILE}: task {config.task!r} is not the one this spec training run was "
                            f"started on ({source.task_name}); restore the file, or start a new --out")
        return source.open(out, seed=config.seed, prompts_per_step=config.prompts, duplicates=config.duplicates,
                           failures=config.failures)
    if source is None:
        return None
    saved = SpecSource.read(out) if (out / SOURCE_FILE).exists() else None
    if saved is not None and saved != source:
        raise UserError(f"{out} holds the unfinished start of a training on {saved.spec} (overrides {saved.overrides}, "
                        f"--from-run {saved.from_run}); repeat that command, or choose another --out")
    written = [name for name in (SOURCE_FILE, *DB_FILES) if not (out / name).exists()]  # what a refusal removes
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    source.save(out)
    try:
        return source.open(out, seed=config.seed, prompts_per_step=config.prompts, duplicates=config.duplicates,
                           failures=config.failures)
    except BaseException:
        if saved is None:  # refused at its start: leave --out as it was
            for name in written:
                (out / name).unlink(missing_ok=True)
            if made and not any(out.iterdir()):
                out.rmdir()
        raise


@click.command()
@click.option("--task", help="Task family (see `evo tasks`).")
@click.option("--spec", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Train on a problem spec instead: the search's prompts, parser and sandboxed scorer.")
@click.option("--from-run", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="--spec: start from this `evo run` directory's program database (copied into --out).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="--spec: override a spec key, as in `evo run`.")
@click.option("--algo", type=params.LazyChoice("training.advantages:REGISTRY"), default=None,
              help="Advantage estimator (default: vpo; vpo_archive with --spec).")
@click.option("--list-algos", is_flag=True, expose_value=False, is_eager=True, callback=list_algos,
              help="Print each estimator and the prompt it trains on (single, set or goal), then exit.")
@click.option("--init", type=click.Path(file_okay=False),
              help="Hugging Face directory to start from, or a shipped checkpoint's name (see evo/checkpoints).")
@click.option("--steps", type=click.IntRange(1), help="Total training steps (default: TrainConfig's, 200).")
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Checkpoint directory.")
@click.option("--resume", is_flag=True, help="Continue the run in --out (to --steps).")
@config_option("--prompts", type=click.IntRange(1), help="Prompts per step.")
@config_option("--group", type=click.IntRange(1), help="Rollouts per prompt (G).")
@config_option("--answers", type=click.IntRange(1), help="Answers per rollout of multi-answer algos (`set` in --list-algos).")
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
@click.option("--max-empty-steps", hidden=True, expose_value=False, callback=params.renamed("--idle-steps"))
@config_option("--duplicates", type=params.LazyChoice("training.search_signal:DUPLICATE_RULES"),
               help="--spec: what a duplicate proposal earns (docs/training.md: penalty, worst, score, zero).")
@config_option("--failures", type=params.LazyChoice("training.search_signal:FAILURE_RULES"),
               help="--spec: what a failed, unparseable or cut-off proposal earns (floor; zero: the old rule, unsafe with minimize).")
@config_option("--save-every", type=click.IntRange(1))
@config_option("--snapshot-every", type=click.IntRange(0),
               help="Also keep the weights of every Nth step in OUT/steps/NNNNNN (held-out curves); 0: never.")
@config_option("--bf16/--no-bf16", help="bfloat16 autocast (default: on CUDA for a 16-bit checkpoint; fast on CPUs with AMX).")
@config_option("--weight-dtype", type=params.LazyChoice("training.precision:SETTINGS"),
               help="Trained weights: auto (float32 masters for full fine-tuning), float32, or bfloat16 (pure bf16, warned).")
@config_option("--seed", type=int)
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE", help="Estimator option, e.g. K=100, sobol=True, k=4.")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(1), help="torch CPU threads.")
@click.option("--progress/--no-progress", default=True, show_default=True)
@config_option("--rollouts", type=params.LazyChoice("training.config:ROLLOUTS"),
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
@config_option("--device", type=params.LazyChoice("training.models:DEVICES"))
@config_option("--chat/--no-chat", help="Apply the tokenizer's chat template (default: when it has one).")
@config_option("--gradient-checkpointing/--no-gradient-checkpointing",
               help="Recompute activations in the backward (default: when the memory plan needs it).")
@config_option("--lora-rank", type=click.IntRange(0), help="Train LoRA adapters of this rank (peft); 0: all weights.")
@config_option("--lora-alpha", type=float)
def command(init, steps, out, resume, options, vllm_options, threads, progress, engine, use_vllm, spec, from_run, sets,
            **settings) -> None:
    """RL-train a checkpoint on a task family (--task) or on a problem spec (--spec); writes a
    Hugging Face directory, metrics.jsonl and trainer state. The last line printed is a JSON summary."""
    import torch

    settings.update(options=parse_options(options), vllm_options=parse_options(vllm_options))
    if resume:  # only the flags given on the command line, to compare with the stored settings
        origin = click.get_current_context().get_parameter_source
        settings = {name: value for name, value in settings.items()
                    if origin(name) == click.core.ParameterSource.COMMANDLINE}
    if init is not None:
        from evo.policies import resolve_checkpoint

        init = str(resolve_checkpoint(init))  # a model directory or a shipped checkpoint's name (maze-warmup)
    source = None if resume else spec_source(spec, from_run, sets, settings, Path(out))
    config = build_config(Path(out), resume, init, steps, settings, engine)
    torch.set_num_threads(threads)
    context = click.get_current_context()
    given = {name for name in settings if context.get_parameter_source(name) not in (None, ParameterSource.DEFAULT)}
    task = open_spec_task(config, source, resume)
    try:
        records = train_with(engine, config, resume=resume, use_vllm=use_vllm, progress=progress, given=given, task=task)
    finally:
        if task is not None:
            task.close()
    last = records[-1] if records else {}
    click.echo(json.dumps({"out": config.out, "algo": config.algo, "steps": config.steps,
                           **{k: last[k] for k in ("scalar", "best_in_set", "diversity") if k in last}}))
