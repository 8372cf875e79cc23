"""Pilot for training during the search (issue 34): one start checkpoint searched frozen and
trained online under several settings, on the same hard mazes and run seeds, paired.

    PYTHONPATH=. OMP_NUM_THREADS=1 python experiments/maze/online_pilot.py --task maze-clusters \
        --start local:maze-clusters-warmup --mazes 12 --seeds 2 --programs 240 --instance-seed 1717 \
        --arm frozen= --arm grpo=grpo --arm vpoa=vpo_archive --arm vpoa-lr2e-5=vpo_archive:lr=2e-5 \
        --out runs/online-pilot

An arm is NAME=ALGO[:KEY=VALUE,...] (empty ALGO: frozen); KEY is a `--train-option` (lr,
kl_coef, ...), `every` (`--train-every`, default 4), `answers` (programs per reply, 0: the
start checkpoint's own; default --answers) or `start` (the arm's own start policy, default --start). ALGO `first+EST` trains first, then searches
frozen: `evo train --spec` on the maze's spec with estimator EST for `steps` x `prompts` x
`group` proposals (KEYs, default 4 x 4 x 4; `lr`: --lr), then a frozen search with the trained
weights for the rest of the budget; both phases' programs count, training's first. Hard mazes: the task's test instances
of --instance-seed whose initial route is off the optimum (`evo compare`'s rule with
--search-pool 0). Each run proposes --programs programs, one route per reply, and spends
them all; its record (runs/NAME/mazeI-sS.json: best / oracle and hypervolume against
programs, share of failed and duplicate proposals) is written when it ends, so a stopped
pilot resumes where it stopped. The table (table.md, table.json) pairs every arm with the
first one over (maze, seed) units with bootstrap CIs.
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

REFERENCE = np.full(4, -0.1)  # maze rewards are in [0, 1]; below 0 so a zero objective keeps volume


FIRST = "first+"  # an arm that trains first (evo train --spec), then searches frozen


def parse_arm(text: str, answers: int) -> tuple[str, str, int, dict, int]:
    name, _, rest = text.partition("=")
    algo, _, options = rest.partition(":")
    pairs = {k: v if k == "start" else ast.literal_eval(v) for k, v in (p.split("=", 1) for p in options.split(",") if p)}
    every = int(pairs.pop("every", 4))
    return name, algo, every, pairs, int(pairs.pop("answers", answers))


def shares(directory: Path) -> dict:
    """Failed and duplicate shares among a run's proposals (the initial program left out), and
    the failed share in the last quarter of them."""
    from evo.database import Database

    with Database.open(directory, read_only=True) as db:
        evaluations = db.journal.evaluations()
        rows = sorted(db.journal.candidates(), key=lambda c: (c.iteration, c.slot))
        failed = [(c.iteration, c.slot) in evaluations and not evaluations[(c.iteration, c.slot)].ok for c in rows]
        duplicate = sum(1 for c in rows if c.status == "duplicate")
        unparsed = sum(1 for c in rows if c.status == "parse")
    total = max(len(rows), 1)
    last = failed[len(failed) * 3 // 4:]
    return {"failed": sum(failed) / total, "failed_last_quarter": sum(last) / max(len(last), 1),
            "duplicate": duplicate / total, "unparsed": unparsed / total}


def train_first(spec_path: Path, overrides: dict, uri: str, arm, seed: int, programs: int, directory: Path):
    """`evo train --spec` from `uri`'s checkpoint, then a frozen search with the trained weights
    for the rest of `programs`: the two phases' programs as one RunVectors, training's first."""
    import subprocess

    from evo import policies as registry
    from evo.compare import spec_search

    _, algo, _, options, answers = arm
    steps, prompts, group = (int(options.get(k, 4)) for k in ("steps", "prompts", "group"))
    spent = steps * prompts * group
    trained = directory / "trained"
    command = [sys.executable, "-m", "evo", "train", "--spec", str(spec_path), "--init", uri.removeprefix("local:"),
               "--algo", algo.removeprefix(FIRST), "--steps", str(steps), "--prompts", str(prompts), "--group", str(group),
               "--seed", str(seed), "--out", str(trained)]
    command += ["--lr", str(options["lr"])] if "lr" in options else []
    command += [f"--set={k}={v}" for k, v in overrides.items()]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = spec_search.run_vectors(trained)
    then = spec_search.run_one(spec_path, overrides, f"local:{trained}", registry.load(f"local:{trained}"), seed,
                               programs - spent, directory / "run", None, answers=answers)
    return spec_search.RunVectors(np.concatenate([first.at, then.at + spent]), np.concatenate([first.vectors, then.vectors]))


def one_run(task, maze, uri, policy, arm, seed, programs, directory: Path, minimized: bool = False) -> dict:
    from training.compare import trained
    from evo.compare import spec_search
    from training.online import OnlineSettings

    name, algo, every, options, answers = arm
    optimum = task.oracle_best(maze)
    spec_path = task.problem_spec(maze, directory.parent / "problems" / f"maze{maze.index}", minimized=minimized)
    overrides = {} if minimized else {"search.target": float(optimum) + 1.0}
    if algo.startswith(FIRST):
        run = train_first(spec_path, overrides, uri, arm, seed, programs, directory)
    else:
        training = {k: v for k, v in options.items() if k != "start"}
        wrap = None if not algo else trained(OnlineSettings.of(algo, every, training))
        run = spec_search.run_one(spec_path, overrides, uri, policy, seed, programs, directory / "run", wrap, answers=answers)
    if minimized:  # score vectors hold -missing share: back to the treasure fractions
        run = spec_search.RunVectors(run.at, 1.0 + run.vectors, run.outcomes)
    best = spec_search.best_curve(run, np.asarray(task.weights, dtype=np.float64), programs) / optimum
    volume = spec_search.hypervolume_curve(run, REFERENCE, programs, points=8)
    return {"maze": maze.index, "seed": seed, "arm": name, "optimum": float(optimum),
            "best": best.tolist(), "hypervolume": volume.tolist(), **shares(directory / "run")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="maze-clusters")
    parser.add_argument("--start", default="local:maze-clusters-warmup")
    parser.add_argument("--mazes", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--programs", type=int, default=240)
    parser.add_argument("--instance-seed", type=int, default=1717)
    parser.add_argument("--answers", type=int, default=1, help="programs per reply (0: the start checkpoint's own)")
    parser.add_argument("--minimized", action="store_true",
                        help="search the maze's minimized spec (objectives = shares left behind, bad routes fail)")
    parser.add_argument("--arm", action="append", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--pool", type=Path, nargs="+",
                        help="no runs: write --out's table over these pilots' records, pooled (same arms)")
    args = parser.parse_args()

    import tasks
    from evo import policies as registry
    from evo.compare.search import SearchProtocol as Search, hard_instances

    arms = [parse_arm(a, args.answers) for a in args.arm]
    if args.pool:
        args.out.mkdir(parents=True, exist_ok=True)
        return write_table(args.out, [a[0] for a in arms], " ".join(sys.argv), args.pool)
    task = tasks.get(args.task)
    mazes, _ = hard_instances(task, Search(instances=args.mazes, instance_seed=args.instance_seed, pool=0),
                              args.out / "instances")
    for maze in mazes:
        for seed in range(args.seeds):
            for arm in arms:
                record = args.out / "runs" / arm[0] / f"maze{maze.index}-s{seed}.json"
                if record.exists():
                    continue
                started = time.perf_counter()
                scratch = args.out / "scratch" / arm[0] / f"maze{maze.index}-s{seed}"
                shutil.rmtree(scratch, ignore_errors=True)
                start = arm[3].get("start", args.start)
                result = one_run(task, maze, start, registry.load(start), arm, seed, args.programs, scratch, args.minimized)
                result["seconds"] = time.perf_counter() - started
                record.parent.mkdir(parents=True, exist_ok=True)
                record.write_text(json.dumps(result) + "\n")
                shutil.rmtree(scratch, ignore_errors=True)
                print(f"maze {maze.index} seed {seed} {arm[0]}: best {result['best'][-1]:.3f}, failed "
                      f"{result['failed']:.2f}, duplicate {result['duplicate']:.2f}, {result['seconds']:.0f} s",
                      file=sys.stderr, flush=True)
    write_table(args.out, [a[0] for a in arms], " ".join(sys.argv))


def write_table(out: Path, names: list[str], command: str, sources: list[Path] | None = None) -> None:
    """table.md / table.json in `out` over the runs of `sources` (default: `out` itself),
    pooled: a unit is (source, maze, seed)."""
    from evo import metrics

    records = {n: {(str(d), r["maze"], r["seed"]): r for d in sources or [out]
                   for r in map(json.loads, map(Path.read_text, (d / "runs" / n).glob("*.json")))} for n in names}
    units = sorted(set.intersection(*(set(r) for r in records.values())))
    base = names[0]
    columns = {}
    for n in names:
        rows = [records[n][u] for u in units]
        columns[n] = {"success": np.array([r["best"][-1] >= 1 - 1e-9 for r in rows], float),
                      "final_best": np.array([r["best"][-1] for r in rows]),
                      "mean_best": np.array([np.mean(r["best"]) for r in rows]),
                      "final_hypervolume": np.array([r["hypervolume"][-1] for r in rows]),
                      "failed": np.array([r["failed"] for r in rows]),
                      "failed_last_quarter": np.array([r.get("failed_last_quarter", np.nan) for r in rows]),
                      "duplicate": np.array([r["duplicate"] for r in rows])}
    table = {}
    lines = [f"| metric | {' | '.join(names)} |", "|---" * (len(names) + 1) + "|"]
    for metric in columns[base]:
        cells = []
        for n in names:
            value = columns[n][metric].mean()
            table.setdefault(n, {})[metric] = {"mean": value}
            if n == base:
                cells.append(f"{value:.3f}")
                continue
            test = metrics.paired_test(columns[n][metric], columns[base][metric], resamples=2000)
            table[n][metric]["vs_" + base] = {"difference": test.mean_difference, "ci95": [test.low, test.high]}
            cells.append(f"{value:.3f} ({test.mean_difference:+.3f} [{test.low:+.3f}, {test.high:+.3f}])")
        lines.append(f"| {metric} | {' | '.join(cells)} |")
    lines.append(f"\n{len(units)} paired (maze, seed) runs per arm; in brackets the paired difference to `{base}` "
                 "with its 95% bootstrap CI.")
    (out / "table.md").write_text("\n".join(lines) + "\n")
    (out / "table.json").write_text(json.dumps({"units": len(units), "table": table, "command": command}, indent=1) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
