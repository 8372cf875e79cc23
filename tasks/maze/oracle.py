"""The exact oracle: every reward vector a route can achieve within the budget.

Breadth-first search over (cell, collected gold/diamond tiles, lava tiles stepped on);
the BFS distance is the fewest moves reaching that state, so a state is achievable
within the budget iff its distance is at most the budget (wasting moves never helps).
E is terminal: a route ends the moment it steps on it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from evo.metrics import front

from tasks.maze.env import LAVA, TREASURES, Maze


@dataclass(frozen=True)
class OracleResult:
    vectors: np.ndarray  # (n, d) every distinct achievable reward vector
    front: np.ndarray  # (p, d) the Pareto-optimal ones
    best_scalar: float  # the best mean of the vector (the deployment scalar)
    shortest: int  # fewest moves from S to E (-1 if unreachable)


def _bits(maze: Maze, tiles: str) -> dict[tuple[int, int], int]:
    cells = [cell for tile in tiles for cell in maze.tiles(tile)]
    return {cell: 1 << i for i, cell in enumerate(cells)}


def exit_outcomes(maze: Maze, tiles: str = TREASURES + LAVA) -> dict[int, int]:
    """Fewest moves to reach E for each achievable mask of the tracked tiles (bit order:
    the tiles of `tiles`, each in row-major order)."""
    bit = _bits(maze, tiles)
    start = (maze.start, bit.get(maze.start, 0))
    distance = {start: 0}
    queue = deque([start])
    outcomes: dict[int, int] = {}
    target = maze.exit
    open_cells = [(r, c) for r in range(maze.size) for c in range(maze.size) if maze.is_open((r, c))]
    adjacent = {cell: maze.neighbours(cell) for cell in open_cells}
    while queue:
        state = queue.popleft()
        cell, mask = state
        steps = distance[state]
        if cell == target:
            outcomes.setdefault(mask, steps)
            continue
        if steps == maze.budget:
            continue
        for nxt in adjacent[cell]:
            following = (nxt, mask | bit.get(nxt, 0))
            if following not in distance:
                distance[following] = steps + 1
                queue.append(following)
    return outcomes


def _vector(maze: Maze, mask: int, treasures: str = TREASURES) -> list[float]:
    counts = [len(maze.tiles(t)) for t in treasures + LAVA]
    fractions, offset = [], 0
    for count in counts:
        taken = bin((mask >> offset) & ((1 << count) - 1)).count("1")
        fractions.append(taken / count if count else 0.0)
        offset += count
    *taken, lava = fractions
    return [1.0, *taken, 1.0 - lava if counts[-1] else 1.0]


def solve(maze: Maze, treasures: str = TREASURES) -> OracleResult:
    """The oracle of the vector [completion, one fraction per kind of `treasures`, avoid_lava]."""
    outcomes = exit_outcomes(maze, treasures + LAVA)
    if not outcomes:
        empty = np.zeros((0, len(treasures) + 2))
        return OracleResult(empty, empty, 0.0, -1)
    vectors = np.unique(np.array([_vector(maze, mask, treasures) for mask in outcomes]), axis=0)
    return OracleResult(
        vectors=vectors,
        front=front(vectors),
        best_scalar=float(vectors.mean(axis=1).max()),
        shortest=min(outcomes.values()),
    )
