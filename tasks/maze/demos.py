"""Demonstration routes for the supervised warm-up: varied, valid routes from S to E.

Each route visits a random subset of one treasure's tiles (each tile with chance TAKE, in
random order; sometimes also a random detour cell) along random shortest legs, sometimes
avoiding lava, and is kept only if it fits the budget; so a model trained on them is
diverse, like a base model, and rarely optimal (all of one treasure and no lava).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from tasks.maze.env import DIAMOND, FLOOR, GOLD, LAVA, TREASURE_NAMES, Cell, Maze


def _distances(maze: Maze, target: Cell, blocked: frozenset[Cell]) -> dict[Cell, int]:
    distance = {target: 0}
    queue = deque([target])
    while queue:
        cell = queue.popleft()
        for nxt in maze.neighbours(cell):
            if nxt not in distance and nxt not in blocked:
                distance[nxt] = distance[cell] + 1
                queue.append(nxt)
    return distance


def random_shortest(
    maze: Maze, source: Cell, target: Cell, rng: np.random.Generator, blocked: frozenset[Cell] = frozenset()
) -> list[Cell] | None:
    """A uniformly tie-broken shortest path source -> target avoiding `blocked` (None if none)."""
    distance = _distances(maze, target, blocked - {source, target})
    if source not in distance:
        return None
    path = [source]
    while path[-1] != target:
        closer = [n for n in maze.neighbours(path[-1]) if distance.get(n, -1) == distance[path[-1]] - 1]
        path.append(closer[rng.integers(len(closer))])
    return path


TAKE = 0.25  # chance that a demonstration visits each tile of its treasure
AVOID_LAVA = 0.1  # chance that a demonstration routes around lava
DETOUR = 0.3  # chance of a detour through a random cell


def _kind(maze: Maze, rng: np.random.Generator) -> str:
    """The treasure a demonstration goes for: gold or diamond with equal chance on the paper's
    maze; one of the kinds present, uniformly, on a maze with other kinds."""
    kinds = [t for t in TREASURE_NAMES if maze.tiles(t)]
    if set(kinds) <= {GOLD, DIAMOND}:
        return GOLD if rng.random() < 0.5 else DIAMOND
    return kinds[int(rng.integers(len(kinds)))]


def _waypoints(maze: Maze, rng: np.random.Generator, take: float = TAKE) -> list[Cell]:
    tiles = list(maze.tiles(_kind(maze, rng)))
    chosen = [tiles[i] for i in rng.permutation(len(tiles)) if rng.random() < take]
    if rng.random() < DETOUR:
        floor = maze.tiles(FLOOR) + maze.tiles(LAVA)
        chosen.insert(int(rng.integers(len(chosen) + 1)), floor[rng.integers(len(floor))])
    return chosen


def random_route(maze: Maze, rng: np.random.Generator, take: float = TAKE) -> tuple[Cell, ...]:
    """One valid route from S to E within the budget (`take`: each tile's chance to be a waypoint)."""
    for _ in range(20):
        avoid = frozenset(maze.tiles(LAVA)) if rng.random() < AVOID_LAVA else frozenset()
        path = [maze.start]
        for goal in [*_waypoints(maze, rng, take), maze.exit]:
            leg = random_shortest(maze, path[-1], goal, rng, avoid | ({maze.exit} - {goal}))
            leg = leg or random_shortest(maze, path[-1], goal, rng, frozenset({maze.exit} - {goal}))
            if leg is None:
                break
            path.extend(leg[1:])
        if path[-1] == maze.exit and len(path) - 1 <= maze.budget:
            return tuple(path)
    leg = random_shortest(maze, maze.start, maze.exit, rng)
    assert leg is not None, "generated mazes always connect S to E"
    return tuple(leg)


def route_set(maze: Maze, m: int, rng: np.random.Generator, take: float = TAKE) -> list[tuple[Cell, ...]]:
    """m routes, distinct when the maze allows it (a few redraws)."""
    routes: list[tuple[Cell, ...]] = []
    for _ in range(10 * m):
        route = random_route(maze, rng, take)
        if route not in routes:
            routes.append(route)
        if len(routes) == m:
            return routes
    while len(routes) < m:
        routes.append(random_route(maze, rng, take))
    return routes
