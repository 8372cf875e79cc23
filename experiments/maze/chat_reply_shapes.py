"""How many routes of a maze-chat set reply become valid programs of the maze-chat spec, by the
shape an instruct model gives its reply: the task's own demonstrations (3 routes) written one a
line, after a line of prose, all on one line, or fenced; split at line breaks (`separator =
"\\n"`, the spec before 9219f5a) and by the spec's `[prompt] answer_pattern` (the route tag).

    python experiments/maze/chat_reply_shapes.py --mazes 10 --seed 11

Measured at 9219f5a (10 test mazes, seed 11, 30 routes a shape), valid programs:
line breaks 30 / 20 / 0 / 20 (lines, prose first, one line, fenced); the pattern 30 / 30 / 30 / 30.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path

import numpy as np

import tasks
from evo import prompt_sets, prompts
from evo import spec as specs
from evo.loop import LoopConfig
from tasks.maze.spec import score_task_file
from tasks.spec_files import SPEC_FILE

SHAPES = {"lines": "{0}\n{1}\n{2}", "prose first": "Here are three routes:\n{0}\n{1}\n{2}", "one line": "{0} {1} {2}",
          "fenced": "```\n{0}\n{1}\n{2}\n```"}
SPLITS = ("line breaks", "answer_pattern")


def valid_programs(spec_path: Path, reply: str, maze: dict) -> int:
    """Valid programs among the 3 the spec's search makes of `reply`."""
    config = LoopConfig.for_spec(specs.load(spec_path))
    base = prompts.Shown((spec_path.parent / "route.txt").read_text(), 0.0)
    one = prompts.build("continue", [base], rng=np.random.default_rng(0), head=config.head, pattern=config.answer_pattern)
    found = prompt_sets.programs(prompt_sets.widen(one, 3, set_head=config.head, separator=config.separator), reply)
    valid = 0
    for program in found:
        if isinstance(program, str):
            candidate = spec_path.parent / "candidate.txt"
            candidate.write_text(program)
            valid += score_task_file(maze, "maze-chat", candidate)["valid"] == 1.0
    return valid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mazes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    task = tasks.get("maze-chat")
    counts = {split: dict.fromkeys(SHAPES, 0) for split in SPLITS}
    with tempfile.TemporaryDirectory() as scratch:
        for i, instance in enumerate(task.instances("test", args.mazes, seed=args.seed)):
            path = task.problem_spec(instance, Path(scratch) / str(i))
            maze = {"rows": list(instance.data.rows), "budget": instance.data.budget}
            lines = path.parent / f"lines-{SPEC_FILE}"  # the same spec split at line breaks
            lines.write_text(re.sub(r"answer_pattern = .*", 'separator = "\\\\n"', path.read_text()))
            routes = task.demonstrations(instance, 3, np.random.default_rng(i)).split("\n")
            for shape, form in SHAPES.items():
                counts["line breaks"][shape] += valid_programs(lines, form.format(*routes), maze)
                counts["answer_pattern"][shape] += valid_programs(path, form.format(*routes), maze)
    print(json.dumps({"mazes": args.mazes, "seed": args.seed, "routes_per_shape": 3 * args.mazes, "valid": counts}))


if __name__ == "__main__":
    main()
