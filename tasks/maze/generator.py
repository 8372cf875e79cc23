"""Seeded maze generation with difficulty knobs.

S and E sit in opposite corner regions, the gold tiles in a third corner and the diamond
tiles in the fourth, and the budget is the longer of "all gold, then E" and "all diamond,
then E" plus `slack`: a route can take gold or diamond, never both (checked exactly;
mazes that break this are redrawn). Walls, lava and slack are the difficulty knobs. A
random symmetry of the square varies the orientation. Train and test mazes are disjoint
by construction (the parity of the maze's checksum decides its split).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from tasks.maze.env import DIAMOND, EXIT, FLOOR, GOLD, LAVA, START, WALL, Maze
from tasks.maze.oracle import exit_outcomes


@dataclass(frozen=True)
class MazeConfig:
    size: int = 7
    wall_density: float = 0.15  # probability that a free cell is a wall
    lava: int = 6  # number of lava tiles
    gold: int = 3  # tiles in the gold corner
    diamond: int = 3  # tiles in the diamond corner
    slack: int = 2  # extra moves over the longer single-treasure route
    corner: int = 2  # side of the corner regions holding S, E and the treasures

    def __post_init__(self) -> None:
        if not 4 <= self.size <= 10:
            raise ValueError(f"maze size must be in 4..10, got {self.size}")
        if max(self.gold, self.diamond) > self.corner**2 - 0 or min(self.gold, self.diamond) < 1:
            raise ValueError("gold and diamond tile counts must be in 1..corner**2")


def split_of(maze: Maze) -> str:
    checksum = zlib.crc32(("\n".join(maze.rows) + f"/{maze.budget}").encode())
    return "train" if checksum % 2 == 0 else "test"


def _corner_cells(size: int, corner: int, top: bool, left: bool) -> list[tuple[int, int]]:
    rows = range(corner) if top else range(size - corner, size)
    cols = range(corner) if left else range(size - corner, size)
    return [(r, c) for r in rows for c in cols]


def _layout(config: MazeConfig, rng: np.random.Generator) -> np.ndarray:
    n, k = config.size, config.corner
    grid = np.full((n, n), FLOOR)
    grid[tuple(_corner_cells(n, k, True, True)[rng.integers(k * k)])] = START
    grid[tuple(_corner_cells(n, k, False, False)[rng.integers(k * k)])] = EXIT
    for tile, count, top in ((GOLD, config.gold, True), (DIAMOND, config.diamond, False)):
        cells = _corner_cells(n, k, top, not top)
        for i in rng.choice(len(cells), size=count, replace=False):
            grid[cells[i]] = tile
    return obstacles(grid, config.wall_density, config.lava, rng)


def obstacles(grid: np.ndarray, wall_density: float, lava: int, rng: np.random.Generator) -> np.ndarray:
    """Walls on each floor cell with chance `wall_density`, then `lava` tiles on the remaining
    floor (both maze families draw them this way, in this rng order)."""
    free = np.argwhere(grid == FLOOR)
    walls = free[rng.random(len(free)) < wall_density]
    grid[tuple(walls.T)] = WALL
    free = np.argwhere(grid == FLOOR)
    for r, c in free[rng.choice(len(free), size=min(lava, len(free)), replace=False)]:
        grid[r, c] = LAVA
    return grid


def _symmetry(grid: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    grid = np.rot90(grid, k=int(rng.integers(4)))
    return grid.T if rng.integers(2) else grid


def _budget(rows: tuple[str, ...], config: MazeConfig) -> int | None:
    """The budget for this layout, or None when the layout is unusable."""
    loose = Maze(rows, budget=4 * config.size**2)
    longest = 0
    for tile, count in ((GOLD, config.gold), (DIAMOND, config.diamond)):
        full = (1 << count) - 1
        steps = exit_outcomes(loose, tiles=tile).get(full)
        if steps is None:
            return None
        longest = max(longest, steps)
    budget = longest + config.slack
    both = exit_outcomes(Maze(rows, budget), tiles=GOLD + DIAMOND)
    gold_bits = (1 << config.gold) - 1
    if any(mask & gold_bits and mask >> config.gold for mask in both):
        return None
    return budget


def generate(config: MazeConfig, rng: np.random.Generator, split: str | None = None) -> Maze:
    """One maze drawn from `rng` (redrawn until valid and, if given, in `split`)."""
    return draw(config, rng, split, _layout, _budget)


def draw(config, rng: np.random.Generator, split: str | None, layout, budget) -> Maze:
    """A maze from `layout(config, rng)` in a random symmetry, redrawn until `budget(rows, config)`
    accepts it (not None) and, if given, it falls in `split`; shared by the maze families."""
    for _ in range(10_000):
        rows = tuple("".join(row) for row in _symmetry(layout(config, rng), rng))
        steps = budget(rows, config)
        if steps is None:
            continue
        maze = Maze(rows, steps)
        if split is None or split_of(maze) == split:
            return maze
    raise RuntimeError(f"could not generate a valid maze for {config}")
