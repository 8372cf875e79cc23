"""The DARLING-style diversity reward and the maze's answer similarity and goal prompts, on
hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

import tasks
from tasks.base import GoalConditioned, Instance, Similar
from tasks.maze import formats
from tasks.maze.env import Maze
from training.diversity import distinctness, diversity_scaled, similarity_matrix

# The hand case: answer 0 is half like answer 1 and unlike answer 2; answers 1 and 2 are the same.
SIM = np.array([[[1.0, 0.5, 0.0], [0.5, 1.0, 1.0], [0.0, 1.0, 1.0]]])


def test_distinctness_is_the_mean_distance_to_the_other_answers():
    # div_0 = (0.5 + 1) / 2, div_1 = (0.5 + 0) / 2, div_2 = (1 + 0) / 2
    np.testing.assert_allclose(distinctness(SIM), [[0.75, 0.25, 0.5]])
    np.testing.assert_allclose(distinctness(np.ones((2, 1, 1))), [[0.0], [0.0]])  # a group of one


def test_rewards_are_scaled_by_one_plus_coef_times_distinctness():
    rewards = np.array([[[[1.0, 0.5]], [[0.2, 0.0]], [[0.0, 0.0]]]])  # (1, 3, 1, 2)
    # coef 2: factors 1 + 2 * (0.75, 0.25, 0.5) = 2.5, 1.5, 2.0 on every objective
    np.testing.assert_allclose(diversity_scaled(rewards, SIM, 2.0), [[[[2.5, 1.25]], [[0.3, 0.0]], [[0.0, 0.0]]]])
    assert np.array_equal(diversity_scaled(rewards, SIM, 0.0), rewards)
    with pytest.raises(ValueError, match="single-answer"):
        diversity_scaled(np.zeros((1, 3, 2, 2)), SIM, 1.0)
    with pytest.raises(ValueError, match="shape"):
        diversity_scaled(rewards, SIM[:, :2, :2], 1.0)


# S . G .      route A: along the top, then down to E     (6 cells)
# . # L .      route B: down the left, then along row c   (6 cells)
# D . . E      route C: along the top, down through lava  (6 cells)
# . . . .
SMALL = Instance("maze", "test", 0, Maze(("S.G.", ".#L.", "D..E", "...."), budget=6))
A = ((0, 0), (0, 1), (0, 2), (0, 3), (1, 3), (2, 3))
B = ((0, 0), (1, 0), (2, 0), (2, 1), (2, 2), (2, 3))
C = ((0, 0), (0, 1), (0, 2), (1, 2), (2, 2), (2, 3))
JUMP = ((0, 0), (2, 2))  # not a route: visits nothing


@pytest.fixture(scope="module")
def maze():
    return tasks.get("maze")


def test_maze_similarity_is_the_jaccard_overlap_of_visited_cells(maze):
    assert isinstance(maze, Similar) and isinstance(maze, GoalConditioned)
    assert maze.similarity(SMALL, A, B) == pytest.approx(2 / 10)  # S and E shared, 10 cells in all
    assert maze.similarity(SMALL, A, C) == pytest.approx(4 / 8)
    assert maze.similarity(SMALL, B, C) == pytest.approx(3 / 9)
    assert maze.similarity(SMALL, A, A) == 1.0 and maze.similarity(SMALL, C, A) == maze.similarity(SMALL, A, C)
    assert maze.similarity(SMALL, A, JUMP) == 0.0 and maze.similarity(SMALL, JUMP, JUMP) == 1.0


def test_similarity_matrix_per_group_and_no_answer_is_unlike_everything(maze):
    sim = similarity_matrix(maze, [SMALL, SMALL], [A, B, C, A, None, A], group=3)
    np.testing.assert_allclose(sim[0], [[1, 0.2, 0.5], [0.2, 1, 1 / 3], [0.5, 1 / 3, 1]])
    np.testing.assert_allclose(sim[1], [[1, 0, 1], [0, 1, 0], [1, 0, 1]])


def test_units_round_a_weighting_down_then_the_largest_remainders_up():
    # 0.25, 0.40, 0.10, 0.25 in ninths: 2.25, 3.6, 0.9, 2.25 -> floors 2, 3, 0, 2 (7 of 9);
    # the two largest remainders (0.9, 0.6) round up -> 2, 4, 1, 2.
    assert formats.units([0.25, 0.40, 0.10, 0.25], 9) == [2, 4, 1, 2]
    assert formats.units([0.25, 0.40, 0.10, 0.25], 100) == [25, 40, 10, 25]
    assert formats.units([1 / 3, 1 / 3, 1 / 3], 100) == [34, 33, 33]  # a tie goes to the first
    assert formats.units([1.0, 0.0, 0.0, 0.0], 9) == [9, 0, 0, 0]


@pytest.mark.parametrize("name", ["maze", "maze-notes"])
def test_compact_goal_prompt_writes_ninths_over_the_column_labels(name):
    task = tasks.get(name)
    instance = task.instances("train", 1, seed=3)[0]
    plain = task.prompt(instance, 1)
    prompt, shown = task.prompt_with_weights(instance, np.array([0.25, 0.40, 0.10, 0.25]))
    assert plain.startswith(" 0123456\n") and prompt == " 2412456\n" + plain[9:]  # same length, same grid
    np.testing.assert_allclose(shown, np.array([2, 4, 1, 2]) / 9)
    assert task.prompt_with_weights(instance, np.array([0.0, 0.0, 0.0, 1.0]))[0].startswith(" 0009456\n")
    with pytest.raises(ValueError, match="summing to 1"):
        task.prompt_with_weights(instance, np.array([0.5, 0.5]))


def test_chat_goal_prompt_says_the_weights_in_percents():
    task = tasks.get("maze-chat")
    instance = task.instances("train", 1)[0]
    text, shown = task.prompt_with_weights(instance, np.array([0.25, 0.40, 0.10, 0.25]))
    assert "25% completion + 40% gold + 10% diamond + 25% avoid_lava" in text
    np.testing.assert_allclose(shown, [0.25, 0.40, 0.10, 0.25])
    assert text.replace(text[text.index("This time"):text.index("Give ")], "") == task.prompt(instance, 1)
