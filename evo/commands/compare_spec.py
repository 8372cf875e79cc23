"""`evo compare --spec SPEC --policy NAME=URI ... --seeds S --programs P`: the spec mode of
`evo compare` (evo/commands/compare.py), a search-only comparison of policies on a user's own
problem (evo/compare/spec_search.py), written like `evo compare --task`."""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
from pathlib import Path

import click
import numpy as np

from evo.commands import params
from evo.errors import UserError


def trainers(pairs: tuple[str, ...], uris: dict[str, str], every: int | None, options: tuple[str, ...], search) -> dict:
    """NAME -> OnlineSettings for `--train NAME=ALGO` (policies trained during each of their runs),
    every setting checked against the policy and the spec's [search] settings."""
    if not pairs:
        if every is not None or options:
            raise UserError("--train-every and --train-option go with --train NAME=ALGO")
        return {}
    from training.online import OnlineSettings

    algos = params.parse_pairs(pairs, "--train")
    for name in algos:
        if name not in uris:
            raise UserError(f"--train {name}=...: no --policy named {name!r}")
    settings = {name: OnlineSettings.of(algo, every or 4, params.parse_options(options)) for name, algo in algos.items()}
    for name, one in settings.items():
        one.check_policy(uris[name], search)
    return settings


def trained(settings):
    """`train(config)` for spec_search.run_one: the run's policy, loaded afresh (every run starts
    from the checkpoint's weights), and the learner that trains it during the run."""
    from evo import policies as registry
    from evo.run_dir import loop_config
    from training.online import Learner

    def start(config):
        policy, spec = registry.load(config.policy), config.spec()
        return policy, Learner.of(policy, config.directory, loop_config(spec, config), next(iter(config.named)), spec.problem,
                               settings)

    return start


def compare(spec_path: Path, policies: tuple[str, ...], sets: tuple[str, ...], seeds: int, programs: int, seed: int,
            out: Path, as_json: bool, quiet: bool, train: tuple[str, ...] = (), train_every: int | None = None,
            train_options: tuple[str, ...] = (), answers: tuple[str, ...] = ()) -> None:
    from tqdm import tqdm

    from evo import policies as registry
    from evo.compare import spec_search, summary
    from evo.run_dir import check_spec

    overrides = params.spec_overrides({}, sets)
    spec = check_spec(spec_path, overrides)
    uris = params.parse_pairs(policies, "--policy")
    if not uris:
        raise UserError("give at least one --policy NAME=URI")
    online = trainers(train, uris, train_every, train_options, spec.search)
    forced = params.answers_pairs(answers, uris)
    if (out / "compare.json").exists() or (out / "search").exists():
        raise UserError(f"{out} already holds a comparison; pick another --out or remove it")
    loaded = {name: registry.load(uri) for name, uri in uris.items()}  # fail before any work
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list] = {}
    with tqdm(total=len(uris) * seeds, disable=quiet, unit="run", dynamic_ncols=True) as bar:
        for name, uri in uris.items():
            bar.set_description(f"searching {name}")
            runs[name] = []
            for run_seed in range(seed, seed + seeds):
                directory = out / "search" / name / f"s{run_seed}"
                wrap = trained(online[name]) if name in online else None
                runs[name].append(spec_search.run_one(spec.path, overrides, uri, loaded[name], run_seed, programs, directory,
                                                      wrap, forced.get(name, 0)))
                bar.update(1)

    weights = np.asarray(spec.problem.weights, dtype=np.float64)
    target = spec.search.target
    best, volume, reference = spec_search.curves(runs, weights, programs)
    columns = {name: {**spec_search.columns(best[name], volume.get(name), target), **spec_search.outcome_columns(runs[name])}
               for name in uris}
    baseline = next(iter(uris))
    rows = summary.table(columns, baseline, seed=seed)
    result = {
        "spec": str(spec.path),
        "overrides": overrides,
        "policies": {name: {"uri": uri, "answers": registry.answers_for(uri, forced.get(name, 0) or spec.search.answers),
                            **({"train": dataclasses.asdict(online[name])} if name in online else {})}
                     for name, uri in uris.items()},
        "settings": {"seeds": seeds, "programs": programs, "first_seed": seed, "target": target,
                     "hypervolume_reference": None if reference is None else reference.tolist()},
        "search": rows,
        "median_programs_to_solve": {name: spec_search.programs_to_solve(best[name], target) for name in uris},
        "command": shlex.join(["evo", *sys.argv[1:]]) if Path(sys.argv[0]).name == "evo" else None,
    }
    text = markdown(result, rows, baseline, seeds)
    (out / "compare.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "compare.md").write_text(text)
    np.savez_compressed(out / "curves.npz", **{f"best_{k}": v for k, v in best.items()},
                        **{f"hypervolume_{k}": v for k, v in volume.items()})
    written = plots(best, volume, out)
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(text + "".join(f"wrote {p}\n" for p in [out / "compare.md", out / "compare.json", *written]))


def markdown(result: dict, rows: dict, baseline: str, seeds: int) -> str:
    from evo.compare import summary

    settings = result["settings"]
    lines = [f"# evo compare: {result['spec']}", "",
             f"## Evolutionary search ({settings['programs']} programs proposed per run; programs per reply: "
             + ", ".join(f"{name} {p['answers']}" for name, p in result["policies"].items()) + ")", "",
             summary.markdown(rows, baseline, seeds).replace("held-out instances", "run seeds (paired by seed)")]
    if settings["target"] is not None:
        lines += [f"Success: the best scalar reached the spec's target {settings['target']:g}. Median programs to solve: "
                  + ", ".join(f"{name} {'-' if c is None else f'{c:.0f}'}" for name, c in result["median_programs_to_solve"].items()), ""]
    if settings["hypervolume_reference"] is not None:
        lines += [f"Hypervolume of the front found so far above {settings['hypervolume_reference']}.", ""]
    if result["command"]:
        lines += ["Reproduce:", "", "```bash", result["command"], "```", ""]
    return "\n".join(lines)


def plots(best: dict, volume: dict, out: Path) -> list[Path]:
    from evo.compare import plots as plotting

    if not plotting.available():
        click.echo("plots skipped: matplotlib is missing (pip install 'vpo-evo[plots]')", err=True)
        return []
    written = [plotting.evolution(best, out / "evolution.png", ylabel="best scalar so far")]
    if volume:
        written.append(plotting.evolution(volume, out / "hypervolume.png", ylabel="front hypervolume so far"))
    return written


@click.command(name="compare")
@click.option("--spec", "spec_path", required=True, type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="your problem spec: compare the policies by search on it")
@click.option("--seeds", default=3, show_default=True, type=click.IntRange(2), help="search runs per policy (paired by seed)")
@click.option("--programs", default=120, show_default=True, type=click.IntRange(1),
              help="programs proposed per search run, the same for every policy (a reply of m programs counts m)")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="override a spec key, as in evo run")
@click.option("--train", "train", multiple=True, metavar="NAME=ALGO",
              help="train policy NAME (local:) during each of its runs, as evo run --train (repeatable)")
@click.option("--train-every", type=click.IntRange(1), default=None, help="--train: committed iterations per PPO step (default 4)")
@click.option("--train-option", "train_options", multiple=True, metavar="KEY=VALUE", help="--train: as evo run --train-option")
@params.compare_options
def command(spec_path, seeds, programs, sets, train, train_every, train_options, policies, answers, seed, out, as_json,
            quiet) -> None:
    """Compare policies by evolutionary search on your own problem spec, run seeds paired."""
    compare(spec_path, policies, sets, seeds, programs, seed, out, as_json, quiet, train, train_every, train_options, answers)
