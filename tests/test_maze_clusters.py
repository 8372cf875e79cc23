"""The four-cluster maze (maze-clusters): its generator's budget rule, the oracle over four
treasure kinds against brute force, demonstrations, the task's 4-objective vector and its
problem spec, and the wide front it is for."""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest

import tasks
from tasks.base import ParseError
from tasks.maze import clusters
from tasks.maze.env import Maze, path_from_moves, reward
from tasks.maze.oracle import solve


@pytest.fixture(scope="module")
def task():
    return tasks.get("maze-clusters")


def test_the_vector_is_one_fraction_per_cluster_and_zero_without_the_exit():
    maze = Maze(("S.GP", ".#..", "DA.E", "...."), budget=5)
    assert reward(maze, path_from_moves(maze, "RRDDR"), clusters.CLUSTERS).tolist() == [1, 1, 0, 0, 0, 1]
    assert not reward(maze, path_from_moves(maze, "RRR"), clusters.CLUSTERS).any()
    task = tasks.get("maze-clusters")
    assert task.objectives == ("gold", "diamond", "pearl", "amber")
    assert task.vector(maze, path_from_moves(maze, "RRRDD")).tolist() == [1, 0, 1, 0]
    assert task.vector(maze, path_from_moves(maze, "DDRRR")).tolist() == [0, 1, 0, 1]


@pytest.mark.parametrize("seed", range(6))
def test_oracle_over_four_kinds_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    while True:
        tiles = rng.choice(list("....#GDPAL"), size=16)
        cells = rng.choice(16, size=2, replace=False)
        tiles[cells[0]], tiles[cells[1]] = "S", "E"
        maze = Maze(tuple("".join(tiles[r * 4 : r * 4 + 4]) for r in range(4)), budget=int(rng.integers(3, 7)))
        if all(maze.tiles(t) for t in clusters.CLUSTERS):
            break
    brute = set()
    for moves in itertools.product("UDLR", repeat=maze.budget):
        vector = reward(maze, path_from_moves(maze, "".join(moves)), clusters.CLUSTERS)
        if vector.any():
            brute.add(tuple(np.round(vector, 12)))
    assert {tuple(np.round(v, 12)) for v in solve(maze, clusters.CLUSTERS).vectors} == brute


def test_generator_budget_takes_the_cheapest_cluster_whole_and_no_more(task):
    for instance in task.instances("train", 8, seed=5):
        maze = instance.data
        assert all(len(maze.tiles(t)) == 5 for t in clusters.CLUSTERS)
        assert 3 in maze.start and 3 in maze.exit  # both on the cross between the corners
        vectors = task.oracle_vectors(instance)
        assert (vectors == 1).any()  # the cheapest cluster fits whole
        shorter = Maze(maze.rows, maze.budget - 2)  # (a route's length has a fixed parity)
        assert not (solve(shorter, clusters.CLUSTERS).vectors[:, 1:5] == 1).any()


def test_demonstrations_are_valid_routes_within_the_budget(task):
    rng = np.random.default_rng(0)
    for instance in task.instances("train", 5):
        answers = task.parse(instance, task.demonstrations(instance, 3, rng), 3)
        assert all(task.path(instance.data, a)[-1] == instance.data.exit for a in answers)
        assert all(len(task.path(instance.data, a)) - 1 <= instance.data.budget for a in answers)
        for letter in clusters.CLUSTERS:
            assert letter in task.prompt(instance, 1)


def test_the_front_is_wider_than_the_papers_maze():
    sizes = {name: np.mean([len(tasks.get(name).oracle_front(i)) for i in tasks.get(name).instances("test", 10)])
             for name in ("maze-notes", "maze-clusters")}
    assert sizes["maze-clusters"] > 3 and sizes["maze-clusters"] > 2 * sizes["maze-notes"]


def test_problem_spec_scores_a_route_with_the_four_objectives(task, tmp_path):
    instance = task.instances("test", 1)[0]
    spec = task.problem_spec(instance, tmp_path)
    assert '"pearl"' in spec.read_text()
    module_spec = importlib.util.spec_from_file_location("clusters_score", tmp_path / "score.py")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    scores = module.evaluate(str(tmp_path / "route.txt"))
    assert set(scores) == {"gold", "diamond", "pearl", "amber", "valid"} and scores["valid"] == 1.0


def test_the_minimized_spec_states_shares_left_behind_and_fails_bad_routes(task, tmp_path):
    from evo import spec as specs
    from tasks.maze.spec import END_LINE, START_LINE

    instance = task.instances("test", 1)[0]
    spec = specs.load(task.problem_spec(instance, tmp_path, minimized=True))
    assert spec.problem.minimize == spec.problem.objectives == tuple(f"missing_{n}" for n in task.objectives)
    module_spec = importlib.util.spec_from_file_location("clusters_missing", tmp_path / "score.py")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    scores = module.evaluate(str(tmp_path / "route.txt"))  # the shipped initial route reaches E
    found = task.score(instance, task.parse(instance, (tmp_path / "route.txt").read_text().split(START_LINE)[1].split(END_LINE)[0]))[0]
    assert scores == {f"missing_{n}": pytest.approx(1 - v) for n, v in zip(task.objectives, found)}
    head, route = (tmp_path / "route.txt").read_text().split(END_LINE)[0].split(START_LINE)
    (tmp_path / "stuck.txt").write_text(head + START_LINE + route.strip()[:2] + "\n" + END_LINE)  # stays on S
    with pytest.raises(ValueError, match="does not reach E"):
        module.evaluate(str(tmp_path / "stuck.txt"))
    (tmp_path / "prose.txt").write_text(head + START_LINE + "go north\n" + END_LINE)
    with pytest.raises(ParseError):
        module.evaluate(str(tmp_path / "prose.txt"))
