"""Paired search results from `evo compare` outputs, pooled over several of them (instance seeds).

Each run record (`search/NAME/iINDEX-sSEED/record.json`, written by evo/compare/search.py) is
paired with the same (output, instance, seed) run of another policy. For each pair of policies
asked for: the paired difference in success, final best / oracle, area under best-so-far and
final hypervolume / oracle front (bootstrap CI and Wilcoxon p, evo.metrics.paired_test), and
the hypervolume difference at every budget point. With --power: the sample size each
difference needs for 80% power at --effect (two-sided 5%), from the sd of the paired differences.

    python experiments/maze/search_pairs.py RUNS/main-s1/search RUNS/main-s2/search \
        --pair vpo:grpo --pair vpo:vpo1 --pair vpo:warmup --json out.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from evo import metrics
from evo.compare.search import SOLVED
from evo.compare.search import columns as search_columns


def columns(runs: list[dict], floor: float | None = None) -> dict[str, np.ndarray]:
    """evo compare's per-run metrics; with `floor`, success also counts a program scoring at
    least `floor` in every objective (the record's best worst objective, `floor`)."""
    result = search_columns(runs)
    if floor is not None:
        result["success"] = np.array([float(solved(r, floor)[-1]) for r in runs])
    return result

Z_TWO_SIDED_5, Z_POWER_80 = 1.959964, 0.841621


def records(searches: list[Path]) -> dict[str, dict[str, dict]]:
    """policy -> "output:instance:seed" -> run record."""
    pooled: dict[str, dict[str, dict]] = {}
    for search in searches:
        for path in sorted(search.glob("*/i*-s*/record.json")):
            record = json.loads(path.read_text())
            pooled.setdefault(record["policy"], {})[f"{search}:{record['instance']}:{record['seed']}"] = record
    return pooled


def needed(sd: float, effect: float) -> int:
    """Paired runs for 80% power at `effect` (two-sided 5%), normal approximation."""
    return int(np.ceil(((Z_TWO_SIDED_5 + Z_POWER_80) * sd / effect) ** 2)) if sd > 0 else 1


def solved(record: dict, floor: float | None) -> np.ndarray:
    """(programs,) whether the run had succeeded after each program: the optimum reached, or
    (with `floor`) a program found scoring at least `floor` in every objective."""
    done = np.asarray(record["best"]) >= SOLVED
    return done | (np.asarray(record["floor"]) >= floor) if floor is not None else done


def places_at_equal(left: dict, right: dict, budget: str) -> tuple[int, int] | None:
    """The programs each run of a pair had proposed when both had spent the same budget: the
    smaller of the two runs' totals in generated `tokens` (a run is cut at its last iteration
    within it) or in `distinct` programs evaluated, or a fixed count of programs ("programs:N").
    None when a record lacks the budget."""
    if budget.startswith("programs:"):
        n = int(budget.partition(":")[2])
        return None if min(len(r["best"]) for r in (left, right)) < n else (n, n)
    if budget == "tokens":
        tokens = [np.asarray(r["tokens"]) for r in (left, right)]
        limit = min(t[-1] for t in tokens)
        return tuple(int(np.searchsorted(t, limit, side="right")) * r["programs_per_iteration"]
                     for t, r in zip(tokens, (left, right)))
    if "distinct" not in left or "distinct" not in right:
        return None
    counts = [np.asarray(r["distinct"]) for r in (left, right)]
    limit = min(c[-1] for c in counts)
    return tuple(int(np.searchsorted(c, limit, side="left")) + 1 for c in counts)


def at_equal(pooled: dict, a: str, b: str, runs: list, budget: str, floor: float | None) -> dict | None:
    """Success and best / oracle of A - B, each run of a pair cut where both spent the same budget."""
    values = {"success": ([], []), "best": ([], [])}
    for run in runs:
        places = places_at_equal(pooled[a][run], pooled[b][run], budget)
        if places is None:
            return None
        for side, (policy, place) in enumerate(zip((a, b), places)):
            record, k = pooled[policy][run], max(place, 1) - 1
            values["success"][side].append(float(solved(record, floor)[k]))
            values["best"][side].append(float(record["best"][k]))
    result = {}
    for metric, (left, right) in values.items():
        test = metrics.paired_test(np.array(left), np.array(right), resamples=4000)
        result[metric] = {"difference": test.mean_difference, "ci95": [test.low, test.high], "p": test.p_value,
                          "a": float(np.mean(left)), "b": float(np.mean(right))}
    return result


def compare(pooled: dict, a: str, b: str, effect: float, floor: float | None = None, cuts: tuple[int, ...] = ()) -> dict:
    runs = sorted(set(pooled[a]) & set(pooled[b]))
    left, right = (columns([pooled[p][r] for r in runs], floor) for p in (a, b))
    result = {"runs": len(runs), "metrics": {},
              "equal_tokens": at_equal(pooled, a, b, runs, "tokens", floor),
              "equal_distinct": at_equal(pooled, a, b, runs, "distinct", floor),
              "at_programs": {n: at_equal(pooled, a, b, runs, f"programs:{n}", floor) for n in cuts}}
    for metric in left:
        test = metrics.paired_test(left[metric], right[metric], resamples=4000)
        sd = float(np.std(left[metric] - right[metric], ddof=1))
        result["metrics"][metric] = {"difference": test.mean_difference, "ci95": [test.low, test.high], "p": test.p_value,
                                     "sd": sd, "runs_for_80_power": needed(sd, effect)}
    volume = [np.array([pooled[p][r]["hypervolume"] for r in runs]) for p in (a, b)]
    marks = pooled[a][runs[0]]["hypervolume_at"]
    result["hypervolume_by_budget"] = []
    for k, mark in enumerate(marks):
        test = metrics.paired_test(volume[0][:, k], volume[1][:, k], resamples=4000)
        result["hypervolume_by_budget"].append({"programs": mark, "difference": test.mean_difference,
                                                "ci95": [test.low, test.high]})
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("search", nargs="+", type=Path, help="the search/ directories of evo compare outputs")
    parser.add_argument("--pair", action="append", default=[], metavar="A:B", help="report A - B (repeatable)")
    parser.add_argument("--effect", type=float, default=0.10, help="the difference the power calculation is for")
    parser.add_argument("--success-floor", type=float, default=None,
                        help="success also when a program scores at least this in every objective (symreg: 0.95)")
    parser.add_argument("--programs", type=int, action="append", default=[], metavar="N",
                        help="also report success and best / oracle with every run cut at N programs (repeatable)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--markdown", type=Path, default=None, help="write the tables as markdown")
    args = parser.parse_args()
    pooled = records(args.search)
    summary = {}
    for policy, runs in pooled.items():
        cols = columns(list(runs.values()), args.success_floor)
        summary[policy] = {"runs": len(runs), **{m: float(v.mean()) for m, v in cols.items()}}
        print(f"{policy}: {len(runs)} runs, " + ", ".join(f"{m} {v.mean():.3f}" for m, v in cols.items()))
    pairs = {}
    for pair in args.pair:
        a, b = pair.split(":")
        pairs[pair] = result = compare(pooled, a, b, args.effect, args.success_floor, tuple(args.programs))
        for metric, m in result["metrics"].items():
            print(f"{a} - {b} {metric}: {m['difference']:+.3f} [{m['ci95'][0]:+.3f}, {m['ci95'][1]:+.3f}] p={m['p']:.2g} "
                  f"(sd {m['sd']:.3f}: {m['runs_for_80_power']} paired runs for 80% power at {args.effect:+.2f}) "
                  f"over {result['runs']} runs")
        cut = {"equal_tokens": result["equal_tokens"], "equal_distinct": result["equal_distinct"],
               **{f"{n}_programs": r for n, r in result["at_programs"].items()}}
        for key, values in cut.items():
            for metric, m in (values or {}).items():
                print(f"{a} - {b} {metric} at {key.replace('_', ' ')}: {m['difference']:+.3f} "
                      f"[{m['ci95'][0]:+.3f}, {m['ci95'][1]:+.3f}] ({m['a']:.3f} vs {m['b']:.3f})")
        print(f"{a} - {b} hypervolume by budget: " + ", ".join(
            f"{h['programs']}: {h['difference']:+.3f} [{h['ci95'][0]:+.3f}, {h['ci95'][1]:+.3f}]"
            for h in result["hypervolume_by_budget"]))
    if args.json:
        args.json.write_text(json.dumps({"policies": summary, "pairs": pairs, "effect": args.effect,
                                         "searches": [str(s) for s in args.search]}, indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown(summary, pairs))


NAMES = {"success": "success", "final_best": "final best / oracle", "area_best": "area under best-so-far / oracle",
         "final_hypervolume": "hypervolume / oracle front's"}


def markdown(summary: dict, pairs: dict) -> str:
    """The per-policy means and the paired differences as markdown tables."""
    metrics_ = list(NAMES)
    lines = ["| policy | runs | " + " | ".join(NAMES[m] for m in metrics_) + " |", "|---|---|" + "---|" * len(metrics_)]
    for policy, row in summary.items():
        lines.append(f"| {policy} | {row['runs']} | " + " | ".join(f"{row[m]:.3f}" for m in metrics_) + " |")
    lines += ["", "| paired difference | runs | " + " | ".join(NAMES[m] for m in metrics_) + " |",
              "|---|---|" + "---|" * len(metrics_)]
    for pair, result in pairs.items():
        cells = [f"{c['difference']:+.3f} [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}]" for c in
                 (result["metrics"][m] for m in metrics_)]
        lines.append(f"| {pair.replace(':', ' - ')} | {result['runs']} | " + " | ".join(cells) + " |")
    lines += ["", "| hypervolume difference at programs | " + " | ".join(
        str(h["programs"]) for h in next(iter(pairs.values()))["hypervolume_by_budget"]) + " |",
        "|---|" + "---|" * len(next(iter(pairs.values()))["hypervolume_by_budget"])] if pairs else []
    for pair, result in pairs.items():
        lines.append(f"| {pair.replace(':', ' - ')} | " + " | ".join(
            f"{h['difference']:+.3f} [{h['ci95'][0]:+.3f}, {h['ci95'][1]:+.3f}]" for h in result["hypervolume_by_budget"]) + " |")
    budgets = [("equal_tokens", "at equal generated tokens"), ("equal_distinct", "at equal distinct evaluations")]
    budgets += [(n, f"at {n} programs") for n in (next(iter(pairs.values())).get("at_programs") or {} if pairs else {})]
    lines += ["", "| paired difference, each pair cut at the smaller budget | " + " | ".join(
        f"success {name} | best / oracle {name}" for _, name in budgets) + " |", "|---|" + "---|---|" * len(budgets)]
    for pair, result in pairs.items():
        cells = []
        for key, _ in budgets:
            for metric in ("success", "best"):
                c = ((result.get(key) if isinstance(key, str) else result["at_programs"].get(key)) or {}).get(metric)
                cells.append("not recorded" if c is None else
                             f"{c['difference']:+.3f} [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}]")
        lines.append(f"| {pair.replace(':', ' - ')} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
