"""What the search half's token budget changes in the published set-search protocol.

`evo compare --task` ran its search at `evo run`'s default completion budget (4096 tokens a
program) before 7 Dec 2026, and at the comparison's `--tokens-per-answer` since. This script
runs the same evolutionary runs (the published hard mazes of an instance seed, the same run
seeds and programs) at both budgets and pairs them: a seeded run is the same run until a
completion longer than the budget is cut, so the paired differences are the budget's effect.

    OMP_NUM_THREADS=1 python experiments/maze/search_budget.py --instances-from \\
        experiments/maze/results-sets/main-s6161/instances.json --mazes 6 --seeds 2 \\
        --policy grpo=local:maze-clusters-grpo:1 --policy vpo1=local:maze-clusters-vpo:1 \\
        --policy vpo=local:maze-clusters-vpo:3 --budget 64 --out /work/runs-budget/s6161
    python experiments/maze/search_budget.py --summary /work/runs-budget/s6161 [...] --json out.json

Each run's record lands in OUT/BUDGET/NAME/iINDEX-sSEED/record.json ("default" for the old
budget) and is not run again when present (resumable). Run it from ca334bd (a worktree), as the
recorded runs were: since 6e7630c `evo run`'s default for a trained checkpoint is its trained
budget, so "default" there is no longer the old 4096 / continue rule.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np

import tasks
from evo import metrics
from evo import policies as registry
from evo.compare import search
from evo.compare.pools import Contender

DEFAULT = "default"  # the budget directory of runs at evo run's default


def run(args: argparse.Namespace) -> None:
    task = tasks.get(args.task)
    chosen = json.loads(Path(args.instances_from).read_text())["chosen"][: args.mazes]
    by_index = {i.index: i for i in task.instances("test", max(chosen) + 1, seed=args.instance_seed)}
    protocol = search.SearchProtocol(instances=len(chosen), seeds=args.seeds, programs=args.programs, pool=0)
    contenders = [Contender(name, uri, int(m)) for name, _, spec in (p.partition("=") for p in args.policy)
                  for uri, m in [spec.rsplit(":", 1)]]
    loaded = {c.name: registry.load(c.uri) for c in contenders}
    for index in chosen:
        for seed in range(args.seeds):
            for c in contenders:
                for label, budget in ((DEFAULT, None), (str(args.budget), args.budget)):
                    directory = Path(args.out) / label / c.name / f"i{index}-s{seed}"
                    if (directory / search.RECORD).is_file():
                        continue
                    shutil.rmtree(directory, ignore_errors=True)
                    record = search.run_one(task, by_index[index], c, loaded[c.name], seed, protocol, directory, budget)
                    (directory / search.RECORD).write_text(json.dumps(record) + "\n")
                    print(label, c.name, index, seed, record["best"][-1], record["tokens"][-1], flush=True)


def summary(outs: list[Path], budget: str) -> dict:
    """Per policy: paired differences (budget minus default) of evo compare's search columns,
    the runs that differ at all, and tokens per program at each budget."""
    result: dict[str, dict] = {}
    for path in sorted({p.parent.name for out in outs for p in (out / budget).glob("*/i*")}):
        pairs = []
        for out in outs:
            for new in sorted((out / budget / path).glob("i*/" + search.RECORD)):
                old = out / DEFAULT / path / new.parent.name / search.RECORD
                if old.is_file():
                    pairs.append((json.loads(old.read_text()), json.loads(new.read_text())))
        if not pairs:
            continue
        before, after = (search.columns([p[k] for p in pairs]) for k in (0, 1))
        result[path] = {"runs": len(pairs), "runs_that_differ": sum(a["best"] != b["best"] for a, b in pairs),
                        "tokens_per_program": {label: float(np.mean([p[k]["tokens"][-1] / len(p[k]["best"]) for p in pairs]))
                                               for k, label in ((0, DEFAULT), (1, budget))}}
        for name in before:
            test = metrics.paired_test(after[name], before[name], seed=0)
            result[path][name] = {DEFAULT: float(np.mean(before[name])), budget: float(np.mean(after[name])),
                                  **dataclasses.asdict(test)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="maze-clusters")
    parser.add_argument("--instances-from", help="a published compare's instances.json (its chosen hard mazes)")
    parser.add_argument("--instance-seed", type=int, default=6161, help="the instance seed it was chosen from")
    parser.add_argument("--mazes", type=int, default=6)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--programs", type=int, default=240)
    parser.add_argument("--policy", action="append", default=[], help="NAME=URI:ANSWERS")
    parser.add_argument("--budget", type=int, default=64)
    parser.add_argument("--out", help="where the runs go")
    parser.add_argument("--summary", nargs="*", type=Path, help="pair the runs of these outputs instead")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.summary:
        result = summary(args.summary, str(args.budget))
        text = json.dumps(result, indent=1)
        print(text)
        if args.json:
            args.json.write_text(text + "\n")
    else:
        run(args)


if __name__ == "__main__":
    main()
