"""`evo compare --task T`: matched-budget sampling metrics on held-out instances of a task
family, then evolutionary search on its hard instances. Each policy is asked the way it was
trained (m programs per reply from its training config, or --answers NAME=M), and every search
is budgeted in programs proposed, equal for all."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from evo.compare import plots, pools, search, summary
from evo.compare import settings as settings_file
from evo.compare.output import Comparison, reproduce
from evo.compare.pools import Contender, Sampling
from evo.compare.search import SearchProtocol
from evo.errors import UserError


def ks_of(text: str, pool: int) -> tuple[int, ...]:
    """`--k 1,5,10,30`: the sorted k values, each between 1 and `pool`."""
    try:
        ks = tuple(sorted({int(k) for k in text.split(",") if k.strip()}))
    except ValueError:
        raise UserError(f"--k {text!r}: expected comma-separated integers, e.g. 1,5,10,30") from None
    if not ks or ks[0] < 1 or ks[-1] > pool:
        raise UserError(f"--k {text!r}: every k must be between 1 and the pool size {pool}")
    return ks


def compare(task_name: str, uris: Mapping[str, str], forced: Mapping[str, int], k_text: str, instances: int,
            sampling: Sampling, settings: SearchProtocol, out: Path, *, resume: bool = False, quiet: bool = False,
            command: str | None = None) -> Comparison:
    """Sample every policy's pools on `instances` held-out instances, then search (unless
    `settings.instances` is 0); the first policy is the baseline."""
    import tasks
    from tqdm import tqdm

    from evo import policies as registry

    try:
        task = tasks.get(task_name)
    except tasks.UnknownTask as error:
        raise UserError(str(error)) from None
    contenders = [Contender(name, uri, forced[name] if name in forced else registry.trained_answers(uri))
                  for name, uri in uris.items()]
    if not sampling.tokens_per_answer:  # 0 (the command's default): equal budgets, the largest any policy was trained with
        sampling = replace(sampling, tokens_per_answer=pools.answer_budget([registry.trained_tokens(u) for u in uris.values()]))
    pool = sampling.pool
    ks = ks_of(k_text, pool)
    for c in contenders:
        if pool % c.answers:
            raise UserError(f"--pool {pool} is not a multiple of {c.name}'s {c.answers} answers per completion")
    recorded = settings_file.task_settings(task_name, contenders, ks, instances, sampling, settings)
    settings_file.check(out, recorded, resume)
    if resume:
        search.check_records(out / "search", contenders, settings)
    loaded = {c.name: registry.load(c.uri) for c in contenders}  # fail before any work
    held_out = pools.held_out(task, instances, sampling.seed, fronts=False)
    settings_file.record(out, recorded)

    total = len(contenders) * (instances + settings.instances * settings.seeds)
    with tqdm(total=total, disable=quiet, unit="inst", dynamic_ncols=True) as bar:
        vectors, columns, runs = {}, {}, {}
        tokens: dict[str, list[float]] = {}  # per policy: tokens per candidate answer, per instance
        for c in contenders:
            bar.set_description(f"sampling {c.name}")
            tokens[c.name] = []
            vectors[c.name] = pools.sample_pool(loaded[c.name], task, held_out.instances, c.answers, sampling, bar.update,
                                                tokens=tokens[c.name])
            columns[c.name] = summary.per_instance(vectors[c.name], task.weights, held_out.optimum, ks)
        if all(any(counts) for counts in tokens.values()):  # every policy returns its token ids: the cost beside the quality
            for name, counts in tokens.items():
                columns[name][summary.TOKENS] = np.asarray(counts, dtype=np.float64)
        if settings.instances:
            bar.set_description("searching")
            runs = search.run_all(task, contenders, loaded, settings, out / "search", lambda: bar.update(1),
                                  sampling.tokens_per_answer)

    baseline = contenders[0].name
    rows = summary.table(columns, baseline, seed=sampling.seed)
    result = {
        "task": task_name,
        "policies": {c.name: {"uri": c.uri, "answers": c.answers} for c in contenders},
        "settings": {"instances": instances, "pool": pool, "k": list(ks), "temperature": sampling.temperature,
                     "tokens_per_answer": sampling.tokens_per_answer,
                     "seed": sampling.seed, "search": settings.__dict__},
        "sampling": rows,
        "search": search.summary(runs, baseline, sampling.seed) if runs else {},
        "command": command,
    }
    curves = {k: np.array([r["best"] for r in v]) for k, v in runs.items()}
    arrays: dict[str, Any] = {**vectors, **{f"curve_{k}": v for k, v in curves.items()}}

    def draw(folder: Path) -> list[Path]:
        written = [plots.best_at_k(rows, ks, folder / "best_at_k.png"),
                   plots.reward_scatter(vectors, task.objectives, folder / "reward_space.png")]
        if runs:
            written.append(plots.evolution(curves, folder / "evolution.png"))
            grid, by_tokens = search.token_curves(runs)
            written.append(plots.evolution(by_tokens, folder / "evolution_tokens.png", xlabel="generated tokens", x=grid))
        return written

    return Comparison(result, markdown(result, rows, baseline, instances), "pools.npz", arrays, draw)


def markdown(result: dict, rows: dict, baseline: str, instances: int) -> str:
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
    return "\n".join(lines + reproduce(result["command"]))
