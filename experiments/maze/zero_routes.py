"""Why a set model's routes score zero: every route of kept completions (evaluate.py
--completions) classified, in this order, as cut off by the token budget, malformed (or
missing from a set with too few routes), an illegal step (a jump, a wall, a move letter
that contradicts its cells, not starting on S), missing the exit, over the budget, a repeat
of an earlier route of its set, or valid; and how many routes the training reward's rules
zero (a repeat, and every route of a set that does not parse as a whole).

    python experiments/maze/zero_routes.py experiments/maze/results-long/rescored/completions/vpo-s0.json.gz \
        --task maze-notes --mazes 200 --maze-seed 2026 --answers 3
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import Counter
from pathlib import Path

import tasks
from tasks.base import ParseError, TemplateMismatch
from tasks.completions import TRAINING, score_completion
from tasks.maze.env import path_from_cells, path_from_moves, truncate_at_exit

KINDS = ("cut off", "malformed", "illegal step", "misses the exit", "over budget", "repeat", "valid")


def classify(task, instance, text: str, finished: bool, m: int) -> list[str]:
    """One kind per route slot of the completion."""
    maze = instance.data
    pieces = task.answer_texts(text)
    kinds, seen = [], set()
    for i in range(m):
        if i >= len(pieces) or (not finished and i == len(pieces) - 1):
            kinds.append("cut off" if not finished else "malformed")
            continue
        try:
            answer = task.parse(instance, pieces[i], 1)[0]
        except (ParseError, TemplateMismatch):
            kinds.append("malformed")
            continue
        path = path_from_moves(maze, answer) if isinstance(answer, str) else path_from_cells(maze, answer)
        if path is None:
            kinds.append("illegal step")
            continue
        path = truncate_at_exit(maze, path)
        if path[-1] != maze.exit:
            kinds.append("misses the exit")
        elif len(path) - 1 > maze.budget:
            kinds.append("over budget")
        elif path in seen:
            kinds.append("repeat")
        else:
            kinds.append("valid")
        seen.add(path)
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("completions")
    parser.add_argument("--task", default="maze-notes")
    parser.add_argument("--mazes", type=int, default=200)
    parser.add_argument("--maze-seed", type=int, default=2026)
    parser.add_argument("--answers", type=int, default=3)
    args = parser.parse_args()
    task = tasks.get(args.task)
    instances = task.instances("test", args.mazes, seed=args.maze_seed)
    texts = json.loads(gzip.decompress(Path(args.completions).read_bytes()))
    kinds, zeroed_by_training = Counter(), Counter()
    sets_failed = 0
    for instance, kept in zip(instances, texts):
        for text, finished in kept:
            slots = classify(task, instance, text, finished, args.answers)
            kinds.update(slots)
            matrix, parsed = score_completion(task, instance, text, finished, args.answers, TRAINING)
            sets_failed += not parsed
            zeroed = slots if not parsed else [kind for kind in slots if kind != "valid"]  # (TRAINING packs its rows)
            assert len(zeroed) == int((~matrix.any(axis=1)).sum()) or not parsed
            zeroed_by_training.update(zeroed)
    routes = sum(kinds.values())
    zero = routes - kinds["valid"] - kinds["repeat"]
    print(f"{routes} routes in {routes // args.answers} sets; {sets_failed} sets ({sets_failed / (routes // args.answers):.1%}) "
          "do not parse as a whole (a malformed route, the wrong count, or cut off)")
    print("| kind | routes | share of routes | share of the training rules' zero routes | share of zero routes scored route by route |")
    print("|---|---|---|---|---|")
    total_zeroed = sum(zeroed_by_training.values())
    for kind in KINDS:
        own = f"{kinds[kind] / zero:.1%}" if kind not in ("valid", "repeat") and zero else "-"
        print(f"| {kind} | {kinds[kind]} | {kinds[kind] / routes:.1%} | {zeroed_by_training[kind] / total_zeroed:.1%} | {own} |")
    print(f"training rules: {total_zeroed} zero routes ({total_zeroed / routes:.1%}); route by route, repeats kept: {zero} ({zero / routes:.1%})")
    never = kinds["illegal step"] + kinds["misses the exit"] + kinds["over budget"]
    print(f"of the training rules' zero routes: repeats {zeroed_by_training['repeat'] / total_zeroed:.1%}, "
          f"never reaching the exit or stepping illegally {(zeroed_by_training['illegal step'] + zeroed_by_training['misses the exit'] + zeroed_by_training['over budget']) / total_zeroed:.1%}, "
          f"fine routes zeroed with their set {zeroed_by_training['valid'] / total_zeroed:.1%}; all routes never reaching the exit or stepping illegally: {never}")


if __name__ == "__main__":
    main()
