"""The maze: a grid with a start, an exit, gold, diamonds, lava and walls, and its reward.

A route is the sequence of visited cells starting on S. The reward vector is
[completion, gold, diamond, avoid_lava], all zero unless the route reaches E within the
step budget; the route ends the moment it steps on E (items count only if collected before).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

WALL, FLOOR, START, EXIT, GOLD, DIAMOND, LAVA = "#", ".", "S", "E", "G", "D", "L"
PEARL, AMBER = "P", "A"  # the two further treasures of the four-cluster variant (tasks/maze/clusters.py)
TREASURES = GOLD + DIAMOND  # the paper's maze: one objective per treasure kind
TREASURE_NAMES = {GOLD: "gold", DIAMOND: "diamond", PEARL: "pearl", AMBER: "amber"}
TILES = WALL + FLOOR + START + EXIT + GOLD + DIAMOND + LAVA + PEARL + AMBER
OBJECTIVES = ("completion", "gold", "diamond", "avoid_lava")


def objectives(treasures: str = TREASURES) -> tuple[str, ...]:
    """[completion, one fraction per treasure kind, avoid_lava]."""
    return ("completion", *(TREASURE_NAMES[t] for t in treasures), "avoid_lava")
MOVES = {"U": (-1, 0), "D": (1, 0), "L": (0, -1), "R": (0, 1)}

Cell = tuple[int, int]


@dataclass(frozen=True)
class Maze:
    """`rows` are strings over TILES (one S, one E); `budget` is the most moves a route may take."""

    rows: tuple[str, ...]
    budget: int

    def __post_init__(self) -> None:
        size = len(self.rows)
        if size < 2 or any(len(row) != size for row in self.rows):
            raise ValueError(f"a maze is a square grid, got rows of lengths {[len(r) for r in self.rows]}")
        text = "".join(self.rows)
        if set(text) - set(TILES) or text.count(START) != 1 or text.count(EXIT) != 1:
            raise ValueError("a maze has tiles from #.SEGDL with exactly one S and one E")

    @property
    def size(self) -> int:
        return len(self.rows)

    def tiles(self, tile: str) -> tuple[Cell, ...]:
        return tuple((r, c) for r, row in enumerate(self.rows) for c, ch in enumerate(row) if ch == tile)

    @property
    def start(self) -> Cell:
        return self.tiles(START)[0]

    @property
    def exit(self) -> Cell:
        return self.tiles(EXIT)[0]

    def is_open(self, cell: Cell) -> bool:
        r, c = cell
        return 0 <= r < self.size and 0 <= c < self.size and self.rows[r][c] != WALL

    def neighbours(self, cell: Cell) -> list[Cell]:
        r, c = cell
        return [(r + dr, c + dc) for dr, dc in MOVES.values() if self.is_open((r + dr, c + dc))]


def path_from_moves(maze: Maze, moves: str) -> tuple[Cell, ...]:
    """The visited cells of a U/D/L/R route; a blocked move costs a step and stays in place."""
    cell = maze.start
    path = [cell]
    for move in moves:
        dr, dc = MOVES[move]
        target = (cell[0] + dr, cell[1] + dc)
        cell = target if maze.is_open(target) else cell
        path.append(cell)
    return tuple(path)


def path_from_cells(maze: Maze, cells: Sequence[Cell]) -> tuple[Cell, ...] | None:
    """The cells as a path, or None when it is invalid: it must start on S and every step
    must go to an adjacent open cell (a jump or a step into a wall invalidates the route)."""
    if not cells or tuple(cells[0]) != maze.start:
        return None
    if any(step_error(maze, a, b) for a, b in zip(cells, cells[1:])):
        return None
    return tuple(tuple(cell) for cell in cells)  # type: ignore[misc]


def step_error(maze: Maze, a: Cell, b: Cell) -> str | None:
    """Why the step a -> b is invalid ("jump" or "wall"), or None when it is a legal move."""
    if abs(a[0] - b[0]) + abs(a[1] - b[1]) != 1:
        return "jump"
    return None if maze.is_open(b) else "wall"


def truncate_at_exit(maze: Maze, path: Sequence[Cell]) -> tuple[Cell, ...]:
    """The path up to and including its first arrival on E (the whole path if it never arrives)."""
    target = maze.exit
    for i, cell in enumerate(path):
        if cell == target:
            return tuple(path[: i + 1])
    return tuple(path)


def reward(maze: Maze, path: Sequence[Cell] | None, treasures: str = TREASURES) -> np.ndarray:
    """[completion, gold, diamond, avoid_lava] of a path (None = invalid: zeros); with other
    `treasures`, one fraction per kind between completion and avoid_lava."""
    vector = np.zeros(len(treasures) + 2)
    if path is None:
        return vector
    path = truncate_at_exit(maze, path)
    if path[-1] != maze.exit or len(path) - 1 > maze.budget:
        return vector
    visited = set(path)
    vector[0] = 1.0
    for i, tile in enumerate(treasures, 1):
        cells = maze.tiles(tile)
        vector[i] = len(visited.intersection(cells)) / len(cells) if cells else 0.0
    lava = maze.tiles(LAVA)
    vector[-1] = 1.0 - len(visited.intersection(lava)) / len(lava) if lava else 1.0
    return vector


def moves_from_path(path: Sequence[Cell]) -> str:
    """The U/D/L/R moves of a path of adjacent (or repeated, for blocked moves) cells."""
    names = {delta: name for name, delta in MOVES.items()}
    return "".join(names[(r1 - r0, c1 - c0)] for (r0, c0), (r1, c1) in zip(path, path[1:]))
