"""Issue 25's evidence: search on hard held-out mazes with the warm-up frozen, trained online
by GRPO, trained online by VPO against the archive, and the shipped VPO checkpoint frozen.

    PYTHONPATH=. python experiments/maze/online_evidence.py --mazes 16 --seeds 3 --calls 100 \
        --search-instance-seed 4242 --out runs/online-evidence

The hard mazes are `evo compare`'s (evo/compare/search.py: the first test-split maze-notes
instances drawn with --search-instance-seed whose initial program is not optimal); each run
is `evo run` of the maze's spec with the target set to its optimum, run seeds 0 .. seeds-1,
the online policies trained afresh from the warm-up in each run (`evo run --train`,
--train-every iterations per step). Per (maze, seed) unit: success (optimum reached), calls
to solve, best so far and the hypervolume of the front found so far (reference 0) against
calls. Written to --out: table.json / table.md (means with bootstrap CIs; paired differences
over units against the frozen warm-up and against online GRPO), curves.npz, and with
matplotlib hypervolume.png and evolution.png.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

SAMPLES = 4  # programs per call: the maze specs' samples_per_prompt
REFERENCE = np.full(4, -0.1)  # maze rewards are in [0, 1]; below 0 so a zero objective keeps volume
POLICIES = {  # name: (URI, online estimator or None)
    "warmup": ("local:maze-notes-warmup", None),
    "online-grpo": ("local:maze-notes-warmup", "grpo"),
    "online-vpo-archive": ("local:maze-notes-warmup", "vpo_archive"),
    "vpo": ("local:maze-notes-vpo", None),
}


def run_all(args, out: Path, after_maze=lambda best, volume: None) -> tuple[dict, dict]:
    import tasks
    from evo import policies as registry
    from training.compare import trained
    from evo.compare import spec_search
    from evo.compare.search import SearchProtocol as Search, hard_instances
    from training.online import OnlineSettings

    task = tasks.get("maze-notes")
    mazes, _ = hard_instances(task, Search(instances=args.mazes, instance_seed=args.search_instance_seed, pool=0),
                              out / "instances")
    programs = args.calls * SAMPLES  # one program per reply: a call is an iteration of SAMPLES programs, as in issue 25
    best, volume = {name: [] for name in POLICIES}, {name: [] for name in POLICIES}
    for maze in mazes:
        optimum = task.oracle_best(maze)
        spec_path = task.problem_spec(maze, out / "problems" / f"maze{maze.index}")
        overrides = {"search.target": optimum}
        for name, (uri, algo) in POLICIES.items():
            wrap = None if algo is None else trained(OnlineSettings(algo, args.train_every))
            for seed in range(args.seeds):
                started = time.perf_counter()
                run = spec_search.run_one(spec_path, overrides, uri, registry.load(uri), seed, programs,
                                          out / "runs" / name / f"maze{maze.index}-s{seed}", wrap, answers=1)
                best[name].append(spec_search.best_curve(run, task.weights, programs)[SAMPLES - 1::SAMPLES] / optimum)
                volume[name].append(spec_search.hypervolume_curve(run, REFERENCE, programs)[SAMPLES - 1::SAMPLES])
                print(f"maze {maze.index} {name} seed {seed}: best {best[name][-1][-1]:.3f} of the optimum, "
                      f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        after_maze({k: np.stack(v) for k, v in best.items()}, {k: np.stack(v) for k, v in volume.items()})
    return {k: np.stack(v) for k, v in best.items()}, {k: np.stack(v) for k, v in volume.items()}


def table(best: dict, volume: dict) -> dict:
    from evo import metrics
    from evo.compare import spec_search, summary

    columns = {name: spec_search.columns(best[name], volume[name], 1.0 - 1e-9) for name in best}
    rows = summary.table(columns, "warmup")
    for name in best:
        if name not in ("warmup", "online-grpo"):
            for metric, values in columns[name].items():
                test = metrics.paired_test(values, columns["online-grpo"][metric], resamples=2000)
                rows[name][metric]["vs_online_grpo"] = {"difference": test.mean_difference, "ci95": [test.low, test.high],
                                                        "p": test.p_value}
    for name in best:
        rows[name]["median_calls_to_solve"] = spec_search.programs_to_solve(best[name], 1.0 - 1e-9)  # curves are per call
        rows[name]["hypervolume_above_both_from_call_50"] = None
    calls = next(iter(volume.values())).shape[1]
    if calls > 50:
        mean = {name: v.mean(axis=0) for name, v in volume.items()}
        rows["online-vpo-archive"]["hypervolume_above_both_from_call_50"] = bool(
            (mean["online-vpo-archive"][49:] > np.maximum(mean["warmup"][49:], mean["online-grpo"][49:])).all())
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mazes", type=int, default=16)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--train-every", type=int, default=4)
    parser.add_argument("--search-instance-seed", type=int, default=4242)
    parser.add_argument("--out", type=Path, default=Path("runs/online-evidence"))
    args = parser.parse_args()
    started = time.perf_counter()
    best, volume = run_all(args, args.out, lambda b, v: write(args, b, v, time.perf_counter() - started, partial=True))
    write(args, best, volume, time.perf_counter() - started, partial=False)


def write(args, best: dict, volume: dict, wall_s: float, partial: bool) -> None:
    """table.json / table.md / curves.npz / plots of the runs so far (`partial`: mazes still to come)."""
    rows = table(best, volume)
    result = {"settings": vars(args) | {"out": str(args.out)}, "policies": {k: list(v) for k, v in POLICIES.items()},
              "runs_per_policy": len(next(iter(best.values()))), "partial": partial,
              "table": rows, "wall_s": wall_s, "command": " ".join(sys.argv)}
    (args.out / "table.json").write_text(json.dumps(result, indent=1) + "\n")
    np.savez_compressed(args.out / "curves.npz", **{f"best_{k}": v for k, v in best.items()},
                        **{f"hypervolume_{k}": v for k, v in volume.items()})
    from evo.compare.spec_mode import draw as plots
    from evo.compare import summary

    columns_rows = {name: {k: v for k, v in row.items() if isinstance(v, dict)} for name, row in rows.items()}
    extra = [f"- {name}: median calls to solve {row['median_calls_to_solve']}" for name, row in rows.items()]
    above = rows["online-vpo-archive"]["hypervolume_above_both_from_call_50"]
    extra.append(f"- online-vpo-archive mean hypervolume above warmup and online-grpo at every call from 50: {above}")
    extra.append(f"- runs per policy: {result['runs_per_policy']}{' (partial)' if partial else ''}; wall {wall_s / 60:.0f} min")
    (args.out / "table.md").write_text(summary.markdown(columns_rows, "warmup", len(next(iter(best.values()))))
                                       .replace("held-out instances", "(maze, seed) runs") + "\n" + "\n".join(extra) + "\n")
    plots(best, volume, args.out)
    if not partial:
        print(json.dumps({name: {k: (v["mean"] if isinstance(v, dict) else v) for k, v in row.items()} for name, row in rows.items()}))


if __name__ == "__main__":
    main()
