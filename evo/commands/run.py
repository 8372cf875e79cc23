"""`evo run SPEC --policy URI ...` and `evo run --resume DIR`."""

from __future__ import annotations

from pathlib import Path

import click

from evo.commands import params, values
from evo.commands.streams import output_to_stderr

from evo.errors import UserError
from evo.loop import RunOptions
from evo.policy_mix import PolicyMix

@click.command(name="run")
@click.argument("spec_path", metavar="SPEC", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--policy", "policy_uris", multiple=True, metavar="[NAME=]URI",
              help="local:PATH | openai:URL#MODEL | vllm:PATH | mutate:; NAME=URI repeated for several policies")
@click.option("--seed", type=int, default=None, help="random seed (default 0)")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="run directory (default runs/<problem name>)")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="continue the run in DIR (after a crash or kill)")
@click.option("--executor", type=click.Choice(["process", "ray"]), default=None,
              help="evaluation workers: the sandbox's process pool (default) or Ray actors")
@params.run_options
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="override any spec key, e.g. --set features.length.bins=20 (repeatable)")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="torch CPU threads for a local: policy (default: half the cores; the rest evaluate)")
@click.option("--quiet", is_flag=True, help="no progress bar")
@click.option("--train", "train_algo", default=None, metavar="ALGO",
              help="train the policy (local:, vllm:, openai:...;train=PATH) during the search with this estimator "
                   "(e.g. vpo_front, grpo); docs/training.md")
@click.option("--train-every", type=click.IntRange(min=1), default=None, help="--train: committed iterations per PPO step (default 4)")
@click.option("--train-option", "train_options", multiple=True, metavar="KEY=VALUE",
              help="--train: lr, entropy_coef, eps_low, ... or an estimator option (K=100)")
@params.spec_options
def command(spec_path, policy_uris, seed, out, resume_dir, executor, sets, threads, quiet, train_algo, train_every,
            train_options, **options) -> None:
    """Evolve the program of SPEC with a policy; resumable with --resume DIR."""
    from evo import policies, run_dir
    from evo.policies import fit, trained_for

    loop_options = params.run_options_given(options)  # unset: the defaults, or a resumed run's stored values
    overrides = values.spec_overrides(options, sets)
    if resume_dir is not None:
        if spec_path is not None or seed is not None:
            raise UserError("--resume DIR takes its spec and seed from DIR; give only --resume (and --iterations, "
                            "--policy NAME=URI to move a policy)")
        moved = values.policy_uris(policy_uris) if policy_uris else None
        config = run_dir.resume_config(resume_dir, overrides, loop_options, executor, moved)
        named = config.named
    else:
        if spec_path is None or not policy_uris:
            raise UserError("evo run needs SPEC and --policy URI (or --resume DIR); without a model: --policy mutate:")
        named = values.policy_uris(policy_uris)
        spec = run_dir.check_spec(spec_path, overrides)
        PolicyMix.of(named, spec.search.policy_weights, spec.search.policy_choice)
        for uri in named.values():
            fit.check(spec, uri)  # a local: model too small for these prompts: before its weights load
        for uri in named.values():  # a checkpoint trained for another task, set format or length: before any work
            cut = [] if "max_new_tokens" in loop_options else trained_for.cut_warnings(spec, uri)  # given: the user's
            for warning in [*trained_for.warnings(spec, uri, policies.answers_for(uri, spec.search.answers)), *cut]:
                click.echo(warning, err=True)
    online = _online_settings(train_algo, train_every, train_options, resume_dir)
    if online is not None:
        if len(named) != 1:
            raise UserError("--train trains one policy in this process: give one --policy")
        online.check_policy(next(iter(named.values())), spec)  # every training setting, before any work
    policies.set_threads(threads, named.values())
    with output_to_stderr():  # stdout holds the run's summary alone (not what vLLM or DeepSpeed print)
        loaded = {name: policies.load(uri) for name, uri in named.items()}  # a bad URI or a dead server: before DIR exists
        if resume_dir is None:
            single = len(policy_uris) == 1 and policy_uris[0] in named  # one bare URI: stored as the run's policy
            config = run_dir.new_config(spec_path, policy_uris[0] if single else named, seed or 0, out, overrides,
                                        RunOptions(**loop_options), executor or "process")
        observers = []
        if online is not None or (resume_dir is not None and (resume_dir / "online" / "settings.json").exists()):
            observers.append(_learner(config, loaded, online))
        summary = run_dir.execute(config, loaded, progress=not quiet, observers=observers)
    click.echo(summary)
    for observer in observers:  # a run too short to train says so here, not only in `evo show`
        if (line := observer.untrained()) is not None:
            click.echo(line, err=True)


def _online_settings(algo: str | None, every: int | None, pairs: tuple[str, ...], resume_dir: Path | None):
    """`--train` settings (training/online.py), checked before any work; None without --train."""
    if algo is None:
        if every is not None or pairs:
            raise UserError("--train-every and --train-option go with --train ALGO")
        return None
    if resume_dir is not None:
        raise UserError("--resume DIR keeps the run's --train settings; give only --resume")
    from training.online import OnlineSettings

    return OnlineSettings.of(algo, every or 4, values.parse_options(pairs))


def _learner(config, loaded: dict, settings):
    """The online learner of the run's one policy (training/online.py): told by the loop what it learns from."""
    from evo.run_dir import loop_config
    from training.online import Learner

    if len(loaded) != 1:
        raise UserError("--train trains one policy in this process: give one --policy")
    (name, policy), = loaded.items()
    spec = config.spec()
    return Learner.of(policy, config.directory, loop_config(spec, config), name, spec.problem, settings)
