"""The paper's maze task: reward vector [completion, gold, diamond, avoid_lava]."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tasks.base import Instance
from tasks.maze import demos, formats
from tasks.maze.env import OBJECTIVES, Maze, moves_from_path, path_from_cells, path_from_moves, reward, truncate_at_exit
from tasks.maze.generator import MazeConfig, generate

STYLES = ("compact", "chat")


class MazeTask:
    """Maze instances in the `compact` (cells) or `chat` (tags, U/D/L/R) format."""

    objectives = OBJECTIVES
    weights = np.ones(len(OBJECTIVES))

    def __init__(self, config: MazeConfig = MazeConfig(), style: str = "compact", name: str = "maze",
                 notes: bool = False) -> None:
        if style not in STYLES:
            raise ValueError(f"unknown maze prompt style {style!r}; expected one of {STYLES}")
        self.config, self.style, self.name, self.notes = config, style, name, notes
        size = config.size
        shown = f"{style} prompts with notes" if notes else f"{style} prompts"
        self.description = f"{size}x{size} maze, {shown}; the paper's gold-vs-diamond trade-off"

    def instances(self, split: str, count: int, seed: int = 0) -> list[Instance]:
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        code = 0 if split == "train" else 1
        return [
            Instance(self.name, split, i, generate(self.config, np.random.default_rng([seed, code, i]), split))
            for i in range(count)
        ]

    def prompt(self, instance: Instance, m: int = 1) -> str:
        maze: Maze = instance.data
        return formats.compact_prompt(maze, m, self.notes) if self.style == "compact" else formats.chat_prompt(maze, m)

    def prompt_with_weights(self, instance: Instance, weights: np.ndarray) -> tuple[str, np.ndarray]:
        """The single-answer prompt showing a weighting of the objectives (compact: in ninths,
        in the header; chat: in whole percents, in words) and the weighting it shows."""
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (len(OBJECTIVES),) or (weights < 0).any() or abs(weights.sum() - 1) > 1e-6:
            raise ValueError(f"weights must be {len(OBJECTIVES)} non-negative numbers summing to 1, got {weights}")
        maze: Maze = instance.data
        total = formats.COMPACT_GOAL_UNITS if self.style == "compact" else formats.CHAT_GOAL_UNITS
        shown = formats.units(weights, total)
        if self.style == "compact":
            return formats.compact_prompt(maze, 1, self.notes, goal=shown), np.array(shown) / total
        return formats.chat_prompt(maze, 1, goal=shown), np.array(shown) / total

    def parse(self, instance: Instance, completion: str, m: int = 1) -> list[Any]:
        """compact: cell tuples; chat: U/D/L/R strings."""
        if self.style == "compact":
            return list(formats.parse_compact(instance.data, completion, m))
        return list(formats.parse_chat(completion, m))

    def path(self, maze: Maze, answer: Any) -> tuple | None:
        """The visited cells of an answer (None if invalid), cut at the first arrival on E."""
        path = path_from_moves(maze, answer) if isinstance(answer, str) else path_from_cells(maze, answer)
        return None if path is None else truncate_at_exit(maze, path)

    def score(self, instance: Instance, answers: Sequence[Any]) -> np.ndarray:
        """One row per answer; invalid answers and repeats of an earlier route score zeros."""
        maze: Maze = instance.data
        rows = np.zeros((len(answers), len(OBJECTIVES)))
        seen: set[tuple] = set()
        for i, answer in enumerate(answers):
            path = self.path(maze, answer)
            if path is None or path in seen:
                continue
            seen.add(path)
            rows[i] = reward(maze, path)
        return rows

    def similarity(self, instance: Instance, a: Any, b: Any) -> float:
        """Jaccard overlap of the cells two routes visit (an invalid route visits none; two
        invalid routes count as the same)."""
        cells = [set(self.path(instance.data, answer) or ()) for answer in (a, b)]
        union = cells[0] | cells[1]
        return len(cells[0] & cells[1]) / len(union) if union else 1.0

    def demonstrations(self, instance: Instance, m: int, rng: np.random.Generator) -> str:
        routes = demos.route_set(instance.data, m, rng)
        if self.style == "compact":
            return formats.compact_answer(instance.data, routes, self.notes)
        return formats.chat_answer([moves_from_path(route) for route in routes])

    def oracle_best(self, instance: Instance) -> float:
        """The best achievable scalar (mean of the vector) on this maze."""
        from tasks.maze.oracle import solve

        return solve(instance.data).best_scalar

    def oracle_front(self, instance: Instance) -> np.ndarray:
        """The exact Pareto front of reward vectors on this maze (empty when E is unreachable)."""
        from tasks.maze.oracle import solve

        return solve(instance.data).front

    def problem_spec(self, instance: Instance, directory: Path) -> Path:
        from tasks.maze.spec import write_spec

        initial = self.demonstrations(instance, 1, np.random.default_rng(instance.index))
        return write_spec(self, instance, Path(directory), initial)


def with_notes() -> MazeTask:
    """The 7x7 compact maze whose prompts list each cell's open moves and whose routes copy them."""
    return MazeTask(name="maze-notes", notes=True)


def chat() -> MazeTask:
    """The 9x9 maze in the chat format, for instruction-tuned models."""
    return MazeTask(MazeConfig(size=9, lava=4), style="chat", name="maze-chat")


__all__ = ["MazeConfig", "MazeTask", "chat"]
