"""`evo compare --task T --policy NAME=URI ... [--k 1,5,10,30] [--out DIR] [--json]`: the task mode
of `evo compare` (evo/commands/compare.py): matched-budget sampling metrics on held-out instances
of a task family, then evolutionary search on its hard instances. Each policy is asked the way it
was trained (m programs per reply from its training config, or --answers NAME=M), and every
search is budgeted in programs proposed, equal for all."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import click
import numpy as np

from evo.commands import params
from evo.compare.pools import Sampling
from evo.compare.search import Search
from evo.errors import UserError


def _contenders(policies: tuple[str, ...], answers: tuple[str, ...]):
    from evo.compare.pools import Contender
    from evo.policies import trained_answers

    uris = params.parse_pairs(policies, "--policy")
    if len(uris) < 1:
        raise UserError("give at least one --policy NAME=URI")
    forced = params.answers_pairs(answers, uris)
    return [Contender(name, uri, forced[name] if name in forced else trained_answers(uri)) for name, uri in uris.items()]


def _ks(text: str, pool: int) -> tuple[int, ...]:
    try:
        ks = tuple(sorted({int(k) for k in text.split(",") if k.strip()}))
    except ValueError:
        raise UserError(f"--k {text!r}: expected comma-separated integers, e.g. 1,5,10,30") from None
    if not ks or ks[0] < 1 or ks[-1] > pool:
        raise UserError(f"--k {text!r}: every k must be between 1 and the pool size {pool}")
    return ks


@click.command(name="compare")
@click.option("--task", "task_name", required=True, help="a registered task family (see evo tasks)")
@click.option("--k", "k_text", default="1,5,10,30", show_default=True, help="k values for pass@k and best@k")
@click.option("--instances", default=100, show_default=True, type=click.IntRange(2), help="held-out instances to sample")
@click.option("--pool", default=Sampling.pool, show_default=True, type=click.IntRange(1), help="candidate answers per instance and policy")
@click.option("--temperature", default=Sampling.temperature, show_default=True, type=params.TEMPERATURE)
@click.option("--tokens-per-answer", default=Sampling.tokens_per_answer, show_default=True, type=click.IntRange(1))
@click.option("--search-instances", default=Search.instances, show_default=True, type=click.IntRange(0), help="hard instances for the evolutionary search (0: skip it)")
@click.option("--search-seeds", default=Search.seeds, show_default=True, type=click.IntRange(1))
@click.option("--search-programs", default=Search.programs, show_default=True, type=click.IntRange(1),
              help="programs proposed per search run, the same for every policy (a reply of m programs counts m)")
@click.option("--search-pool", default=Search.pool, show_default=True, type=click.IntRange(0),
              help="hard instances: no policy's pool of this many sampled answers reaches the optimum (0: only the initial program's rule)")
@click.option("--search-instance-seed", default=Search.instance_seed, show_default=True, type=int,
              help="seed of the hard search instances (test split), apart from --seed's sampling instances")
@click.option("--resume", is_flag=True, help="continue a stopped comparison in --out (same arguments): finished search runs are kept")
@params.compare_options
def command(task_name, k_text, instances, pool, temperature, tokens_per_answer, search_instances, search_seeds, search_programs,
            search_pool, search_instance_seed, resume, policies, answers, seed, out, as_json, quiet) -> None:
    """Compare policies on a task family: matched-budget sampling metrics on held-out instances,
    then evolutionary search on hard instances."""
    import tasks
    from evo import policies as registry
    from evo.compare import pools, search, summary

    try:
        task = tasks.get(task_name)
    except tasks.UnknownTask as error:
        raise UserError(str(error)) from None
    contenders = _contenders(policies, answers)
    ks = _ks(k_text, pool)
    for c in contenders:
        if pool % c.answers:
            raise UserError(f"--pool {pool} is not a multiple of {c.name}'s {c.answers} answers per completion")
    if ((out / "compare.json").exists() or (out / "search").exists()) and not resume:
        raise UserError(f"{out} already holds a comparison; continue a stopped one with --resume (same arguments), "
                        "or pick another --out or remove it")
    loaded = {c.name: registry.load(c.uri) for c in contenders}  # fail before any work
    sampling = Sampling(pool=pool, tokens_per_answer=tokens_per_answer, temperature=temperature, seed=seed)
    settings = Search(instances=search_instances, seeds=search_seeds, programs=search_programs, instance_seed=search_instance_seed,
                      pool=search_pool)
    held_out = pools.held_out(task, instances, seed, fronts=False)
    out.mkdir(parents=True, exist_ok=True)

    from tqdm import tqdm

    total = len(contenders) * (instances + settings.instances * settings.seeds)
    with tqdm(total=total, disable=quiet, unit="inst", dynamic_ncols=True) as bar:
        vectors, columns, runs = {}, {}, {}
        for c in contenders:
            bar.set_description(f"sampling {c.name}")
            vectors[c.name] = pools.sample_pool(loaded[c.name], task, held_out.instances, c.answers, sampling, bar.update)
            columns[c.name] = summary.per_instance(vectors[c.name], task.weights, held_out.optimum, ks)
        if settings.instances:
            bar.set_description("searching")
            runs = search.run_all(task, contenders, loaded, settings, out / "search", lambda: bar.update(1))

    baseline = contenders[0].name
    rows = summary.table(columns, baseline, seed=seed)
    result = {
        "task": task_name,
        "policies": {c.name: {"uri": c.uri, "answers": c.answers} for c in contenders},
        "settings": {"instances": instances, "pool": pool, "k": list(ks), "temperature": temperature, "seed": seed,
                     "search": settings.__dict__},
        "sampling": rows,
        "search": search.summary(runs, baseline, seed) if runs else {},
        "command": shlex.join(["evo", *sys.argv[1:]]) if Path(sys.argv[0]).name == "evo" else None,
    }
    text = _markdown(result, rows, baseline, instances)
    (out / "compare.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "compare.md").write_text(text)
    arrays: dict[str, Any] = {**vectors, **{f"curve_{k}": np.array([r["best"] for r in v]) for k, v in runs.items()}}
    np.savez_compressed(out / "pools.npz", **arrays)
    written = _plots(result, vectors, runs, task, ks, out)
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(text + "".join(f"wrote {p}\n" for p in [out / "compare.md", out / "compare.json", *written]))


def _markdown(result: dict, rows: dict, baseline: str, instances: int) -> str:
    from evo.compare import summary

    lines = [f"# evo compare: {result['task']}", "", "## Matched-budget sampling", "", summary.markdown(rows, baseline, instances)]
    if result["search"]:
        search = result["settings"]["search"]
        answers = ", ".join(f"{name} {p['answers']}" for name, p in result["policies"].items())
        lines += ["## Evolutionary search", "",
                  f"{search['programs']} programs proposed per run (programs per reply: {answers}); success: the optimum "
                  "reached; final best and area under best-so-far as fractions of the optimum; hypervolume as a fraction of "
                  "the oracle front's. Paired by (instance, seed).", "",
                  summary.markdown(result["search"], baseline, search["instances"] * search["seeds"]).replace(
                      "held-out instances", "paired runs")]
    if result["command"]:
        lines += ["Reproduce:", "", "```bash", result["command"], "```", ""]
    return "\n".join(lines)


def _plots(result, vectors, runs, task, ks, out: Path) -> list[Path]:
    from evo.compare import plots

    if not plots.available():
        click.echo("plots skipped: matplotlib is missing (pip install 'vpo-evo[plots]')", err=True)
        return []
    written = [plots.best_at_k(result["sampling"], ks, out / "best_at_k.png"),
               plots.reward_scatter(vectors, task.objectives, out / "reward_space.png")]
    if runs:
        from evo.compare import search

        written.append(plots.evolution({k: np.array([r["best"] for r in v]) for k, v in runs.items()}, out / "evolution.png"))
        grid, by_tokens = search.token_curves(runs)
        written.append(plots.evolution(by_tokens, out / "evolution_tokens.png", xlabel="generated tokens",
                                       x=grid))
    return written
