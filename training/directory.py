"""A training directory's lifecycle, as `evo train` drives it: start a run in `--out` or resume
the one there, on a task family or on a problem spec (a program database grown in `--out`),
with the project's trainer or TRL's, and nothing half-written left by a refusal.

    config, records = train(TrainRequest(out=Path("runs/vpo"), init="maze-warmup", settings={"task": "maze", ...}))

Every refusal is a UserError of one line that says what to do; the checks run before any work.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from evo.errors import UserError


@dataclasses.dataclass(frozen=True)
class TrainRequest:
    """What `evo train` was asked: `settings` are TrainConfig fields (with --resume, only those
    given on the command line, which must repeat the stored ones); `given`: the flags set on the
    command line (TRL refuses those it cannot honour)."""

    out: Path
    settings: dict[str, Any]
    resume: bool = False
    init: str | None = None  # a model directory or a shipped checkpoint's name
    steps: int | None = None
    spec: Path | None = None
    from_run: Path | None = None
    overrides: dict[str, object] = dataclasses.field(default_factory=dict)  # --set on the spec
    engine: str = "ours"
    use_vllm: bool = False
    progress: bool = True
    threads: int = 1
    given: frozenset[str] = frozenset()
    trust_checkpoint: bool = False  # --engine trl --resume: load checkpoint files that may run code


def train(request: TrainRequest):
    """Check, then train; returns the run's TrainConfig and its step records."""
    import torch

    from evo.policies import resolve_checkpoint

    settings = dict(request.settings)
    init = None if request.init is None else str(resolve_checkpoint(request.init))
    source = None if request.resume else spec_source(request.spec, request.from_run, request.overrides, settings,
                                                     request.out, init)
    config = build_config(request.out, request.resume, init, request.steps, settings, request.engine)
    torch.set_num_threads(request.threads)
    task = open_spec_task(config, source, request.resume)
    try:
        records = train_with(request.engine, config, resume=request.resume, use_vllm=request.use_vllm,
                             progress=request.progress, given=set(request.given), task=task,
                             trust_checkpoint=request.trust_checkpoint)
    finally:
        if task is not None:
            task.close()
    return config, records


def holds_run(out: Path, engine: str) -> bool:
    """Whether `out` holds a run `engine` can resume: the project's trainer state, or a TRL checkpoint."""
    from training.checkpoint import has_state

    if engine == "trl":
        from training.integrations.trl import last_checkpoint

        return last_checkpoint(out) is not None
    return has_state(out)


def build_config(out: Path, resume: bool, init: str | None, steps: int | None, settings: dict, engine: str = "ours"):
    """The TrainConfig of a new run in `out`, or of the run there (`resume`), every setting checked."""
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
               task=None, trust_checkpoint: bool = False) -> list[dict]:
    """Run the project's trainer (`ours`) or TRL's GRPOTrainer (`trl`) on `config` (and `task`,
    when it is not a registered family: a problem spec's); `given`: the flags set on the
    command line (TRL refuses those it cannot honour)."""
    if engine == "trl" and task is not None:
        raise UserError("--spec trains with the project's trainer; drop --engine trl")
    if engine == "trl":
        from training.integrations.trl import run as run_trl

        return run_trl(config, use_vllm=use_vllm, progress=progress, given=given, resume=resume,
                       trust_checkpoint=trust_checkpoint)
    if use_vllm:
        raise UserError("--use-vllm is for --engine trl; the project's trainer takes --rollouts vllm")
    from training.trainer import run

    return run(config, resume=resume, progress=progress, task=task)  # its options were checked with the config


def spec_source(spec: Path | None, from_run: Path | None, overrides: dict, settings: dict, out: Path,
                init: str | None = None):
    """The SpecSource of `--spec` (None without it), checked against the prompt context of the
    `init` checkpoint; fills `task` and the default `algo` of `settings`."""
    if spec is None:
        if from_run is not None or overrides:
            raise UserError("--from-run and --set go with --spec PROBLEM.toml")
        settings["algo"] = settings["algo"] or "vpo"
        return None
    if settings["task"] is not None:
        raise UserError("give --task (a built-in family) or --spec (a problem spec), not both")
    from evo.database import DB_FILE
    from evo.policies import fit
    from training.advantages import entry
    from training.spec_task import SpecSource

    algo = settings["algo"] or "vpo_front"
    if entry(algo).prompt != "single":
        raise UserError(f"{algo} needs a {entry(algo).prompt}-answer prompt; a spec's prompts ask for one program: "
                        "use vpo_front or another single-answer estimator (evo train --list-algos)")

    source = SpecSource(str(spec.resolve()), overrides, None if from_run is None else str(from_run.resolve()))
    loaded = source.load()  # a bad spec or override: one line, before anything is written
    if init is not None:  # prompts longer than the model's context: before its weights load and --out exists
        fit.check(loaded, f"local:{init}", fit.TRAIN_REMEDY)
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
