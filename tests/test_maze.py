"""The maze: reward semantics, generator guarantees, the oracle against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tasks.maze.env import Maze, path_from_cells, path_from_moves, reward
from tasks.maze.generator import MazeConfig, generate, split_of
from evo.metrics import front
from tasks.maze.oracle import solve

SMALL = Maze(("S.G.", ".#L.", "D..E", "...."), budget=6)


def brute_force_vectors(maze: Maze) -> set[tuple[float, ...]]:
    """Every distinct non-zero reward vector over all U/D/L/R sequences of budget length
    (a route reaching E earlier is a prefix of one of them, cut at E)."""
    found = set()
    for moves in itertools.product("UDLR", repeat=maze.budget):
        vector = reward(maze, path_from_moves(maze, "".join(moves)))
        if vector.any():
            found.add(tuple(np.round(vector, 12)))
    return found


def random_small_maze(rng: np.random.Generator) -> Maze:
    while True:
        tiles = rng.choice(list(".....#GGDLL"), size=16)
        cells = rng.choice(16, size=2, replace=False)
        tiles[cells[0]], tiles[cells[1]] = "S", "E"
        rows = tuple("".join(tiles[r * 4 : r * 4 + 4]) for r in range(4))
        maze = Maze(rows, budget=int(rng.integers(3, 7)))
        if maze.tiles("G") and maze.tiles("D"):
            return maze


@pytest.mark.parametrize("seed", range(12))
def test_oracle_matches_brute_force_on_small_mazes(seed):
    maze = SMALL if seed == 0 else random_small_maze(np.random.default_rng(seed))
    result = solve(maze)
    oracle = {tuple(np.round(v, 12)) for v in result.vectors}
    assert oracle == brute_force_vectors(maze)
    if oracle:
        assert result.best_scalar == pytest.approx(max(np.mean(v) for v in oracle))


def test_pareto_front_keeps_exactly_the_non_dominated():
    vectors = np.array([[1, 0, 1, 1], [1, 1, 0, 1], [1, 0, 0, 1], [1, 1, 0, 0.5], [1, 0, 1, 1]], dtype=float)
    assert {tuple(v) for v in front(vectors)} == {(1, 0, 1, 1), (1, 1, 0, 1)}


def test_reward_is_zero_unless_the_exit_is_reached_within_budget():
    maze = SMALL
    assert not reward(maze, path_from_moves(maze, "RR")).any()  # never reaches E
    vector = reward(maze, path_from_moves(maze, "DDRRR"))  # S->D tile->E: diamond, no lava
    assert vector.tolist() == [1.0, 0.0, 1.0, 1.0]
    assert reward(maze, path_from_moves(maze, "RRDDR")).tolist() == [1.0, 1.0, 0.0, 0.0]  # gold, the only lava tile
    long = Maze(maze.rows, budget=4)
    assert not reward(long, path_from_moves(long, "DDRRR")).any()  # 5 moves > budget 4


def test_route_ends_on_the_exit_and_later_cells_do_not_count():
    maze = Maze(("S.E.", "...G", "....", "D..."), budget=8)
    assert reward(maze, path_from_moves(maze, "RRRD")).tolist() == [1.0, 0.0, 0.0, 1.0]  # G after E ignored


def test_blocked_moves_cost_a_step_but_jumps_and_walls_invalidate_cell_routes():
    maze = SMALL
    assert path_from_moves(maze, "UL") == ((0, 0), (0, 0), (0, 0))
    assert path_from_cells(maze, [(0, 0), (0, 2)]) is None  # jump
    assert path_from_cells(maze, [(0, 0), (0, 1), (1, 1)]) is None  # wall
    assert path_from_cells(maze, [(0, 1), (0, 2)]) is None  # does not start on S
    assert path_from_cells(maze, [(0, 0), (1, 0)]) == ((0, 0), (1, 0))


def test_maze_rejects_bad_grids():
    with pytest.raises(ValueError):
        Maze(("S.", ".."), budget=3)  # no exit
    with pytest.raises(ValueError):
        Maze(("S.E", ".."), budget=3)


@pytest.mark.parametrize("config", [MazeConfig(), MazeConfig(size=9, lava=4, wall_density=0.2, slack=3)])
def test_generator_is_seeded_and_treasures_exclude_each_other(config):
    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(5):
        maze = generate(config, rng_a)
        assert maze == generate(config, rng_b)
        front = solve(maze).front
        assert len(front) and not np.any((front[:, 1] > 0) & (front[:, 2] > 0))
        assert front[:, 1].max() == 1.0 and front[:, 2].max() == 1.0  # each alone is reachable
        assert len(maze.tiles("L")) == config.lava


def test_generator_respects_the_requested_split():
    for seed in range(6):
        assert split_of(generate(MazeConfig(), np.random.default_rng(seed), "test")) == "test"
        assert split_of(generate(MazeConfig(), np.random.default_rng(seed), "train")) == "train"
