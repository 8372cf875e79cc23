"""`evo compare`: policies side by side, in one of two modes that `--task` or `--spec` picks.

    evo compare --task T    --policy NAME=URI ...   sampling metrics on a task family's held-out instances, then search
    evo compare --spec SPEC --policy NAME=URI ...   search on your own problem (evo/compare/spec_mode.py)

A flag of the other mode is refused in one line that names the mode it belongs to; both modes
write through evo/compare/output.py.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from evo.commands import params, values
from evo.commands.modes import ONE_OF, ModeOption, one_mode
from evo.commands.streams import output_to_stderr
from evo.compare.pools import Sampling
from evo.compare.search import SearchProtocol
from evo.errors import UserError

def task_option(*decls, **attrs):
    return click.option(*decls, cls=ModeOption, mode="--task", show_default=True, **attrs)


def spec_option(*decls, **attrs):
    return click.option(*decls, cls=ModeOption, mode="--spec", show_default=True, **attrs)


@click.command(name="compare")
@click.option("--task", "task_name", is_eager=True, callback=one_mode, help="the task mode: a registered task family (see evo tasks)")
@click.option("--spec", "spec_path", is_eager=True, callback=one_mode, type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="the spec mode: your problem spec, the policies compared by search on it")
@task_option("--k", "k_text", default="1,5,10,30", help="k values for pass@k and best@k")
@task_option("--instances", default=100, type=click.IntRange(2), help="held-out instances to sample")
@task_option("--pool", default=Sampling.pool, type=click.IntRange(1), help="candidate answers per instance and policy")
@task_option("--temperature", default=Sampling.temperature, type=params.TEMPERATURE)
@click.option("--tokens-per-answer", default=0, type=click.IntRange(0), show_default=True,
              help="the token budget of one answer or program (m a reply: m times this; sampling adds 8), the same "
                   "for every policy; 0: the largest any policy's checkpoint was trained with (train_config.json), "
                   "else 64 (--task) or evo run's default (--spec)")
@task_option("--search-instances", default=SearchProtocol.instances, type=click.IntRange(0), help="hard instances for the evolutionary search (0: skip it)")
@task_option("--search-seeds", default=SearchProtocol.seeds, type=click.IntRange(1))
@task_option("--search-programs", default=SearchProtocol.programs, type=click.IntRange(1),
             help="programs proposed per search run, the same for every policy (a reply of m programs counts m)")
@task_option("--search-pool", default=SearchProtocol.pool, type=click.IntRange(0),
             help="hard instances: no policy's pool of this many sampled answers reaches the optimum (0: only the initial program's rule)")
@task_option("--search-hard-below", default=SearchProtocol.hard_below, type=click.FloatRange(0, 1, min_open=True),
             help="hard instances: no policy's pool comes within this fraction of the optimum (default 1: reaches it)")
@task_option("--search-instance-seed", default=SearchProtocol.instance_seed, type=int,
             help="seed of the hard search instances (test split), apart from --seed's sampling instances")
@task_option("--resume", is_flag=True, help="continue a stopped comparison in --out (same arguments; other settings are refused): finished search runs are kept")
@spec_option("--seeds", default=3, type=click.IntRange(2), help="search runs per policy (paired by seed)")
@spec_option("--programs", default=120, type=click.IntRange(1),
             help="programs proposed per search run, the same for every policy (a reply of m programs counts m)")
@spec_option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="override a spec key, as in evo run")
@spec_option("--train", "train", multiple=True, metavar="NAME=ALGO",
             help="train policy NAME (a trainable one: local:, vllm:, openai:...;train=PATH) during each of its runs, "
                  "as evo run --train (repeatable)")
@spec_option("--train-every", type=click.IntRange(1), default=None, help="--train: committed iterations per PPO step (default 4)")
@spec_option("--train-option", "train_options", multiple=True, metavar="KEY=VALUE", help="--train: as evo run --train-option")
@params.compare_options
def command(task_name, spec_path, k_text, instances, pool, temperature, tokens_per_answer, search_instances, search_seeds,
            search_programs, search_pool, search_hard_below, search_instance_seed, resume, seeds, programs, sets, train, train_every,
            train_options, policies, answers, seed, out, as_json, quiet) -> None:
    """Compare policies on a task family (--task T: matched-budget sampling metrics, then evolutionary search)
    or by evolutionary search on your own problem (--spec PROBLEM.toml)."""
    from evo.compare import output

    if task_name is None and spec_path is None:
        raise UserError(ONE_OF)
    line = shlex.join(["evo", *sys.argv[1:]]) if Path(sys.argv[0]).name == "evo" else None
    if task_name is not None:
        from evo.compare import task_mode

        uris = _policies(policies)
        _warn_budget(tokens_per_answer, uris)
        with output_to_stderr():  # stdout holds the result alone
            comparison = task_mode.compare(
                task_name, uris, values.answers_pairs(answers, uris), k_text, instances,
                Sampling(pool=pool, tokens_per_answer=tokens_per_answer, temperature=temperature, seed=seed),
                SearchProtocol(instances=search_instances, seeds=search_seeds, programs=search_programs,
                               instance_seed=search_instance_seed, pool=search_pool, hard_below=search_hard_below),
                out, resume=resume, quiet=quiet, command=line)
    else:
        from evo.compare import spec_mode
        from evo.policies import answers_for, fit, trained_for
        from evo.run_dir import check_spec

        overrides = values.spec_overrides({}, sets)
        spec = check_spec(spec_path, overrides)
        uris = _policies(policies)
        forced = values.answers_pairs(answers, uris)
        for uri in uris.values():  # a local: model too small for these prompts: before weights load and --out exists
            fit.check(spec, uri, fit.COMPARE_REMEDY)
        tokens = spec_mode.budget(uris, tokens_per_answer)  # every policy's
        for name, uri in uris.items():  # a checkpoint trained for another task, set format or length: before any work
            asked = answers_for(uri, forced.get(name, 0) or spec.search.answers)
            cut = [] if tokens_per_answer else trained_for.cut_warnings(spec, uri, tokens, "--tokens-per-answer")
            for warning in [*trained_for.warnings(spec, uri, asked, f"--answers {name}="), *cut]:
                click.echo(warning, err=True)
        trained = _trainers(train, uris, train_every, train_options, spec, forced)
        _warn_budget(tokens_per_answer, uris)
        with output_to_stderr():
            comparison = spec_mode.compare(spec, uris, overrides, forced, seeds, programs, seed, out, trained=trained,
                                           quiet=quiet, command=line, tokens=tokens)
    written = output.write(comparison, out)
    if written.plots_skipped:
        click.echo(output.PLOTS_SKIPPED, err=True)
    click.echo(json.dumps(comparison.result) if as_json
               else comparison.markdown + "".join(f"wrote {p}\n" for p in written.files))


def _warn_budget(tokens_per_answer: int, uris: dict[str, str]) -> None:
    """Given a budget: one line for each policy trained to write longer answers than it allows."""
    from evo import policies as registry
    from evo.compare.pools import budget_warnings

    if tokens_per_answer:
        for warning in budget_warnings(tokens_per_answer, {name: registry.trained_tokens(u) for name, u in uris.items()}):
            click.echo(warning, err=True)


def _policies(policies: tuple[str, ...]) -> dict[str, str]:
    uris = values.parse_pairs(policies, "--policy")
    if not uris:
        raise UserError("give at least one --policy NAME=URI")
    return uris


def _trainers(pairs: tuple[str, ...], uris: dict, every: int | None, options: tuple[str, ...], spec,
              forced: dict) -> dict:
    if not pairs:
        if every is not None or options:
            raise UserError("--train-every and --train-option go with --train NAME=ALGO")
        return {}
    from training.compare import trainers

    return trainers(values.parse_pairs(pairs, "--train"), uris, every, values.parse_options(options), spec, forced)
