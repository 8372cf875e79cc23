"""The four-cluster maze: a wide Pareto front with one objective per treasure cluster.

The 7x7 grid's four 3x3 corners each hold `tiles` tiles of one treasure (gold, diamond,
pearl, amber); S and E sit on the middle row and column (the cross between the corners),
`gap` or more moves apart. The reward vector is [gold, diamond, pearl, amber], each the
fraction of that cluster's tiles walked over by a route that reaches E within the budget
(MazeTask drops the completion and avoid_lava columns of env.reward: every valid route
would earn them, and they would compress the scalar's headroom; no lava by default). The budget is the fewest
moves that collect the whole of the cheapest cluster and reach E, plus `slack` (0 by
default: exactly one cluster can be taken whole, by its tightest route; the others only in
part, and what a route takes from one cluster competes with what it can take from another,
so the exact front has 10.2 points on average against the paper's maze's 2.4; a budget 2
under it gives 4.8, 4 under it 2.2: experiments/maze/results-clusters/variants.md). A random
symmetry of the square varies the orientation; the train/test split is the parity of the
maze's checksum, as for the paper's maze (tasks/maze/generator.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tasks.maze.env import AMBER, DIAMOND, EXIT, FLOOR, GOLD, PEARL, START, Maze
from tasks.maze.generator import draw, obstacles
from tasks.maze.oracle import exit_outcomes

CLUSTERS = GOLD + DIAMOND + PEARL + AMBER


@dataclass(frozen=True)
class ClusterConfig:
    size: int = 7
    tiles: int = 5  # treasure tiles in each 3x3 corner
    lava: int = 0
    wall_density: float = 0.1  # probability that a free cell is a wall
    slack: int = 0  # moves over the cheapest "whole cluster, then E" route
    gap: int = 3  # fewest moves between S and E

    def __post_init__(self) -> None:
        if self.size != 7:
            raise ValueError(f"the four-cluster maze is 7x7, got size {self.size}")
        if not 1 <= self.tiles <= 9:
            raise ValueError(f"tiles per cluster must be in 1..9, got {self.tiles}")


def _corner(top: bool, left: bool) -> list[tuple[int, int]]:
    return [(r, c) for r in (range(3) if top else range(4, 7)) for c in (range(3) if left else range(4, 7))]


CROSS = [(3, c) for c in range(7)] + [(r, 3) for r in range(7) if r != 3]


def _layout(config: ClusterConfig, rng: np.random.Generator) -> np.ndarray:
    grid = np.full((7, 7), FLOOR)
    while True:
        start, exit_ = (CROSS[i] for i in rng.choice(len(CROSS), size=2, replace=False))
        if abs(start[0] - exit_[0]) + abs(start[1] - exit_[1]) >= config.gap:
            break
    grid[start], grid[exit_] = START, EXIT
    for tile, (top, left) in zip(CLUSTERS, ((True, True), (True, False), (False, True), (False, False))):
        cells = _corner(top, left)
        for i in rng.choice(len(cells), size=config.tiles, replace=False):
            grid[cells[i]] = tile
    return obstacles(grid, config.wall_density, config.lava, rng)


def _budget(rows: tuple[str, ...], config: ClusterConfig) -> int | None:
    """The cheapest whole cluster's route length plus slack, or None when some cluster
    cannot be reached and left for E at all (the layout is redrawn)."""
    loose = Maze(rows, budget=4 * config.size**2)
    cheapest = None
    for tile in CLUSTERS:
        outcomes = exit_outcomes(loose, tiles=tile)
        if len(outcomes) < 2 or (1 << config.tiles) - 1 not in outcomes:
            return None
        steps = outcomes[(1 << config.tiles) - 1]
        cheapest = steps if cheapest is None else min(cheapest, steps)
    shortest = min(exit_outcomes(loose, tiles="").values())
    return max(cheapest + config.slack, shortest + 1)


def generate(config: ClusterConfig, rng: np.random.Generator, split: str | None = None) -> Maze:
    """One maze drawn from `rng` (redrawn until valid and, if given, in `split`)."""
    return draw(config, rng, split, _layout, _budget)
