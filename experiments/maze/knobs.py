"""How the maze's difficulty knobs move a warm-up's headroom: held-out quality of one
checkpoint on test mazes drawn with changed `MazeConfig` fields (exit rate, best@k as a
fraction of the oracle, solved@k, front coverage@k).

    python experiments/maze/knobs.py --checkpoint evo/checkpoints/maze-notes-warmup --task maze-notes \
        --knob default --knob slack=0 --knob lava=10 --knob slack=0,lava=10 --out knobs.md

The checkpoint was trained on the default knobs, so other settings are measured out of its
training distribution: what the numbers show is how much room a setting leaves, not what a
warm-up trained on it would reach.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch

import tasks
from tasks.maze import MazeTask
from training import models
from training.sft import evaluate


def parse_knob(text: str) -> dict:
    """`default`, or `field=value,field=value` (ints, or floats with a dot), into overrides."""
    if text == "default":
        return {}
    overrides = {}
    for part in text.split(","):
        field, sep, value = part.partition("=")
        if not sep or not value:
            raise ValueError(f"bad knob {part!r}: write field=value, e.g. slack=0")
        overrides[field] = float(value) if "." in value else int(value)
    return overrides


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--task", default="maze-notes")
    parser.add_argument("--knob", action="append", required=True, help="default, or MazeConfig fields such as slack=0,lava=10")
    parser.add_argument("--mazes", type=int, default=30)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--max-new-tokens", type=int, default=90)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, help="write a markdown table here (and JSON next to it)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    base: MazeTask = tasks.get(args.task)
    model, tokenizer = models.load(args.checkpoint)
    fields = {f.name for f in dataclasses.fields(base.config)}
    rows = []
    for text in args.knob:
        try:
            overrides = parse_knob(text)
        except ValueError as error:
            parser.error(str(error))
        unknown = set(overrides) - fields
        if unknown:
            parser.error(f"unknown MazeConfig field(s) {sorted(unknown)}; expected some of {sorted(fields)}")
        try:
            config = dataclasses.replace(base.config, **overrides)
        except ValueError as error:  # MazeConfig's own range checks
            parser.error(f"knob {text!r}: {error}")
        task = MazeTask(config, base.style, base.name, base.notes)
        held_out = task.instances("test", args.mazes)
        quality = evaluate(model, tokenizer, task, held_out, samples=args.samples, max_new_tokens=args.max_new_tokens,
                           temperature=args.temperature, oracle=True)
        rows.append({"knobs": text, **quality})
        print(json.dumps(rows[-1]), flush=True)
    k = args.samples
    lines = [f"| knobs | parseable | exit | oracle | best@{k} | best@{k} / oracle | solved@{k} | front cov.@{k} |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['knobs']} | {r['parse_rate']:.3f} | {r['nonzero_rate']:.3f} | {r['oracle_best']:.3f} | "
                     f"{r[f'best_at_{k}']:.3f} | {r[f'best_at_{k}_over_oracle']:.3f} | {r[f'solved_at_{k}']:.3f} | "
                     f"{r[f'front_coverage_at_{k}']:.3f} |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        args.out.write_text(table)
        args.out.with_suffix(".json").write_text(json.dumps({"settings": vars(args), "rows": rows}, indent=1,
                                                             default=str) + "\n")


if __name__ == "__main__":
    main()
