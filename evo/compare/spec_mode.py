"""`evo compare --spec SPEC`: a search-only comparison of policies on a user's own problem
(evo/compare/spec_search.py runs and measures each search), run seeds paired, written like
`evo compare --task` (evo/compare/output.py)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from evo.compare import plots, spec_search, summary
from evo.compare import settings as settings_file
from evo.compare.output import Comparison, reproduce
from evo.errors import UserError


def compare(spec, uris: Mapping[str, str], overrides: dict, forced: Mapping[str, int], seeds: int, programs: int,
            seed: int, out: Path, *, trained: Mapping[str, tuple[dict, Callable]] | None = None, quiet: bool = False,
            command: str | None = None, tokens: int | None = None) -> Comparison:
    """Search `spec` (evo.spec.Spec, loaded with `overrides`) `seeds` times with every policy,
    `programs` programs proposed per run, each at `tokens` tokens, the same for every policy
    (`budget`; None: evo run's default); `trained`: NAME -> (its training settings, the
    `train(config, loop)` starter of spec_search.run_one) for policies trained during their runs."""
    from evo import policies as registry

    trained = trained or {}
    answers = {name: registry.answers_for(uri, forced.get(name, 0) or spec.search.answers) for name, uri in uris.items()}
    recorded = settings_file.spec_settings(spec.path, uris, answers, overrides, seeds, programs, seed,
                                           {name: t[0] for name, t in trained.items()}, tokens)
    settings_file.check(out, recorded, resume=False)
    loaded = {name: registry.load(uri) for name, uri in uris.items()}  # fail before any work
    made = not out.exists()
    settings_file.record(out, recorded)
    try:
        runs = _search(spec, uris, loaded, overrides, forced, seeds, programs, seed, out, trained, quiet, tokens)
    except UserError as error:  # a comparison has no resume: what it began goes, so the same command runs again
        shutil.rmtree(out if made else out / "search", ignore_errors=True)
        (out / settings_file.SETTINGS_FILE).unlink(missing_ok=True)
        raise UserError(f"{error}; evo compare kept nothing of this comparison in {out}: fix that and run the same "
                        "command again") from None

    weights = np.asarray(spec.problem.weights, dtype=np.float64)
    target = spec.search.target
    best, volume, reference = spec_search.curves(runs, weights, programs)
    scored = spec_search.reports_valid(run for name in uris for run in runs[name])  # one row set for every policy
    columns = {name: {**spec_search.columns(best[name], volume.get(name), target),
                      **spec_search.outcome_columns(runs[name], scored)} for name in uris}
    baseline = next(iter(uris))
    rows = summary.table(columns, baseline, seed=seed)
    result = {
        "spec": str(spec.path),
        "overrides": overrides,
        "policies": {name: {"uri": uri, "answers": answers[name],
                            **({"train": trained[name][0]} if name in trained else {})}
                     for name, uri in uris.items()},
        "settings": {"seeds": seeds, "programs": programs, "first_seed": seed, "target": target, "tokens_per_answer": tokens,
                     "hypervolume_reference": None if reference is None else reference.tolist()},
        "search": rows,
        "median_programs_to_solve": {name: spec_search.programs_to_solve(best[name], target) for name in uris},
        "command": command,
    }
    arrays = {**{f"best_{k}": v for k, v in best.items()}, **{f"hypervolume_{k}": v for k, v in volume.items()}}
    return Comparison(result, markdown(result, rows, baseline, seeds), "curves.npz", arrays,
                      lambda folder: draw(best, volume, folder))


def budget(uris: Mapping[str, str], tokens_per_answer: int = 0) -> int | None:
    """Every policy's tokens a program: `tokens_per_answer`, else the largest any policy's
    checkpoint was trained to write, else None (evo run's default)."""
    from evo import policies as registry

    return tokens_per_answer or max((t for t in map(registry.trained_tokens, uris.values()) if t is not None), default=None)


def _search(spec, uris: Mapping[str, str], loaded: dict, overrides: dict, forced: Mapping[str, int], seeds: int,
            programs: int, seed: int, out: Path, trained: Mapping[str, tuple[dict, Callable]], quiet: bool,
            tokens: int | None) -> dict[str, list]:
    """Every policy's `seeds` search runs, each in out/search/NAME/sSEED, at `tokens` a program
    (None: evo run's default)."""
    from tqdm import tqdm

    runs: dict[str, list] = {}
    with tqdm(total=len(uris) * seeds, disable=quiet, unit="run", dynamic_ncols=True) as bar:
        for name, uri in uris.items():
            bar.set_description(f"searching {name}")
            runs[name] = []
            for run_seed in range(seed, seed + seeds):
                directory = out / "search" / name / f"s{run_seed}"
                wrap = trained[name][1] if name in trained else None
                runs[name].append(spec_search.run_one(spec.path, overrides, uri, loaded[name], run_seed, programs, directory,
                                                      wrap, forced.get(name, 0), tokens))
                bar.update(1)
    return runs


def markdown(result: dict, rows: dict, baseline: str, seeds: int) -> str:
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
    return "\n".join(lines + reproduce(result["command"]))


def draw(best: dict, volume: dict, out: Path) -> list[Path]:
    """The best scalar so far and (with few enough objectives) the front's hypervolume, per policy."""
    written = [plots.evolution(best, out / "evolution.png", ylabel="best scalar so far")]
    if volume:
        written.append(plots.evolution(volume, out / "hypervolume.png", ylabel="front hypervolume so far"))
    return written
