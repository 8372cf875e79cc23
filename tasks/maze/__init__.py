"""The paper's maze task: reward vector [completion, gold, diamond, avoid_lava]."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tasks.base import Instance
from tasks.maze import demos, formats
from tasks.maze import clusters, generator
from tasks.maze.clusters import ClusterConfig
from tasks.maze.env import (TREASURES, Maze, moves_from_path, objectives, path_from_cells,
                            path_from_moves, reward, truncate_at_exit)
from tasks.maze.generator import MazeConfig

STYLES = ("compact", "chat")


class MazeTask:
    """Maze instances in the `compact` (cells) or `chat` (tags, U/D/L/R) format.

    The paper's maze (a MazeConfig) scores [completion, gold, diamond, avoid_lava]; the
    four-cluster maze (a ClusterConfig, tasks/maze/clusters.py) scores only the four
    treasure fractions [gold, diamond, pearl, amber], all zero unless the route reaches E
    within the budget, so no objective is a constant that every valid route earns."""

    def __init__(self, config: MazeConfig | ClusterConfig = MazeConfig(), style: str = "compact", name: str = "maze",
                 notes: bool = False, take: float = demos.TAKE) -> None:
        if style not in STYLES:
            raise ValueError(f"unknown maze prompt style {style!r}; expected one of {STYLES}")
        self.config, self.style, self.name, self.notes, self.take = config, style, name, notes, take
        self.clustered = isinstance(config, ClusterConfig)
        self.treasures = clusters.CLUSTERS if self.clustered else TREASURES
        full = objectives(self.treasures)
        self._columns = slice(1, 1 + len(self.treasures)) if self.clustered else slice(0, len(full))
        self.objectives = full[self._columns]
        self.weights = np.ones(len(self.objectives))
        size = config.size
        shown = f"{style} prompts with notes" if notes else f"{style} prompts"
        trade_off = "four treasure clusters under a binding budget" if self.clustered else "the paper's gold-vs-diamond trade-off"
        self.description = f"{size}x{size} maze, {shown}; {trade_off}"

    def instances(self, split: str, count: int, seed: int = 0) -> list[Instance]:
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', got {split!r}")
        code = 0 if split == "train" else 1
        return [
            Instance(self.name, split, i, self._generate(np.random.default_rng([seed, code, i]), split))
            for i in range(count)
        ]

    def _generate(self, rng: np.random.Generator, split: str) -> Maze:
        if self.clustered:
            return clusters.generate(self.config, rng, split)
        return generator.generate(self.config, rng, split)

    def vector(self, maze: Maze, path: tuple | None) -> np.ndarray:
        """The task's reward vector of a path (None: invalid, zeros)."""
        return reward(maze, path, self.treasures)[self._columns]

    def prompt(self, instance: Instance, m: int = 1) -> str:
        maze: Maze = instance.data
        return formats.compact_prompt(maze, m, self.notes) if self.style == "compact" else formats.chat_prompt(maze, m)

    def prompt_with_weights(self, instance: Instance, weights: np.ndarray) -> tuple[str, np.ndarray]:
        """The single-answer prompt showing a weighting of the objectives (compact: in ninths,
        in the header; chat: in whole percents, in words) and the weighting it shows."""
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (len(self.objectives),) or (weights < 0).any() or abs(weights.sum() - 1) > 1e-6:
            raise ValueError(f"weights must be {len(self.objectives)} non-negative numbers summing to 1, got {weights}")
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

    def answer_texts(self, completion: str) -> list[str]:
        """The routes of a completion as texts, each parseable alone with m = 1."""
        if self.style == "compact":
            return completion.strip().split(formats.SEPARATOR)
        return [f"<route_1>{body}</route_1>" for _, body in formats.route_tags(completion)]

    def path(self, maze: Maze, answer: Any) -> tuple | None:
        """The visited cells of an answer (None if invalid), cut at the first arrival on E."""
        path = path_from_moves(maze, answer) if isinstance(answer, str) else path_from_cells(maze, answer)
        return None if path is None else truncate_at_exit(maze, path)

    def score(self, instance: Instance, answers: Sequence[Any]) -> np.ndarray:
        """One row per answer; invalid answers and repeats of an earlier route score zeros."""
        maze: Maze = instance.data
        rows = np.zeros((len(answers), len(self.objectives)))
        seen: set[tuple] = set()
        for i, answer in enumerate(answers):
            path = self.path(maze, answer)
            if path is None or path in seen:
                continue
            seen.add(path)
            rows[i] = self.vector(maze, path)
        return rows

    def similarity(self, instance: Instance, a: Any, b: Any) -> float:
        """Jaccard overlap of the cells two routes visit (an invalid route visits none; two
        invalid routes count as the same)."""
        cells = [set(self.path(instance.data, answer) or ()) for answer in (a, b)]
        union = cells[0] | cells[1]
        return len(cells[0] & cells[1]) / len(union) if union else 1.0

    def demonstrations(self, instance: Instance, m: int, rng: np.random.Generator) -> str:
        routes = demos.route_set(instance.data, m, rng, self.take)
        if self.style == "compact":
            return formats.compact_answer(instance.data, routes, self.notes)
        return formats.chat_answer([moves_from_path(route) for route in routes])

    def oracle_best(self, instance: Instance) -> float:
        """The best achievable scalar (mean of the vector) on this maze."""
        vectors = self.oracle_vectors(instance)
        return float(vectors.mean(axis=1).max()) if len(vectors) else 0.0

    def oracle_vectors(self, instance: Instance) -> np.ndarray:
        """Every distinct reward vector a route can achieve on this maze."""
        from tasks.maze.oracle import solve

        return np.unique(solve(instance.data, self.treasures).vectors[:, self._columns], axis=0)

    def oracle_front(self, instance: Instance) -> np.ndarray:
        """The exact Pareto front of reward vectors on this maze (empty when E is unreachable)."""
        from evo.metrics import front

        vectors = self.oracle_vectors(instance)
        return front(vectors) if len(vectors) else vectors

    def problem_spec(self, instance: Instance, directory: Path, minimized: bool = False) -> Path:
        """The maze as a problem spec for `evo run`; `minimized`: its objectives stated as the
        shares left behind, lower is better, and bad routes failing (tasks/maze/spec.py)."""
        from tasks.maze.spec import write_spec

        initial = self.demonstrations(instance, 1, np.random.default_rng(instance.index))
        return write_spec(self, instance, Path(directory), initial, minimized)


def with_notes() -> MazeTask:
    """The 7x7 compact maze whose prompts list each cell's open moves and whose routes copy them."""
    return MazeTask(name="maze-notes", notes=True)


CLUSTER_TAKE = 0.1  # each tile's chance to be a demonstration's waypoint: a warm-up with headroom


def with_clusters() -> MazeTask:
    """The 7x7 four-cluster maze with notes (tasks/maze/clusters.py): a front of 10.2 points on
    average against the paper's maze's 2.4 (experiments/maze/variants.py)."""
    return MazeTask(ClusterConfig(), name="maze-clusters", notes=True, take=CLUSTER_TAKE)


def chat() -> MazeTask:
    """The 9x9 maze in the chat format, for instruction-tuned models."""
    return MazeTask(MazeConfig(size=9, lava=4), style="chat", name="maze-chat")


__all__ = ["ClusterConfig", "MazeConfig", "MazeTask", "chat", "with_clusters"]
