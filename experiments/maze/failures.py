"""Why a maze checkpoint's single-route answers fail: the share of sampled routes that step
into a wall, jump, contradict their move letter, run over the budget, stop before E, or reach E.
With `--task maze-notes` it also reports how often a written note is the cell's true note
(the copy) and how often the next move is one the written note allows (the rule).

    python experiments/maze/failures.py evo/checkpoints/maze-warmup [--mazes 30] [--samples 30]
    python experiments/maze/failures.py evo/checkpoints/maze-notes-warmup --task maze-notes
"""

from __future__ import annotations

import argparse
import collections
import json
import re

import torch

import tasks
from tasks.base import ParseError, TemplateMismatch
from tasks.maze import formats
from tasks.maze.env import Maze, step_error, truncate_at_exit
from training import models
from training.sft import sample


def verdict(maze: Maze, text: str) -> str:
    try:
        cells = formats.parse_compact(maze, text, 1)[0]
    except (ParseError, TemplateMismatch):
        return "unparseable"
    if cells[0] != maze.start:
        return "wrong start"
    for a, b in zip(cells, cells[1:]):
        if b == formats.INVALID:
            return "move letter contradicts the cell"
        if error := step_error(maze, a, b):
            return error
    path = truncate_at_exit(maze, cells)
    if path[-1] != maze.exit:
        return "ends before E"
    return "over budget" if len(path) - 1 > maze.budget else "reaches E"


_STEP = re.compile(r"([UDLR]?)([a-j])([0-9])([k-z#]?)")


def note_checks(maze: Maze, text: str, counts: collections.Counter[str]) -> None:
    """Count notes written, notes equal to the cell's note, and moves the previous note allows."""
    written = None
    for move, row, col, note in _STEP.findall(text.split(formats.SEPARATOR)[0]):
        cell = (formats.ROW_LABELS.index(row), int(col))
        if move and written in formats.NOTES:
            allowed = formats.NOTES.index(written)
            counts["moves after a note"] += 1
            counts["moves the note allows"] += bool(allowed >> "UDLR".index(move) & 1)
        if note and max(cell) < maze.size:
            counts["notes"] += 1
            counts["notes copied right"] += note == formats.note(maze, cell)
        written = note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--mazes", type=int, default=30)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--task", default="maze")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tokenizer = models.load(args.checkpoint)
    task = tasks.get(args.task)
    counts: collections.Counter[str] = collections.Counter()
    notes: collections.Counter[str] = collections.Counter()
    for i, instance in enumerate(task.instances("test", args.mazes, seed=0)):
        for completion in sample(model, tokenizer, [task.prompt(instance, 1)], args.samples, 96, 1.0, seed=i)[0]:
            counts[verdict(instance.data, completion.text)] += 1
            note_checks(instance.data, completion.text, notes)
    total = sum(counts.values())
    result = {name: round(n / total, 3) for name, n in counts.most_common()}
    if notes["notes"]:
        result["notes copied right"] = round(notes["notes copied right"] / notes["notes"], 3)
        result["moves the note allows"] = round(notes["moves the note allows"] / max(1, notes["moves after a note"]), 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
