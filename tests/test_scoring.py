"""How a completion's answers are scored: the training reward (repeats zero, a bad set zero)
against evaluation (every answer as it stands, route by route), and the pool metrics over
valid answers and against the oracle."""

from __future__ import annotations

import numpy as np
import pytest

import tasks
from evo.compare import summary
from tasks.completions import EVALUATION, TRAINING, Scoring, score_completion
from tests.toytask import CharMix
from training.config import TrainConfig
from training.trainer import scoring_for

BY_ANSWER = Scoring(dedup=True, by_answer=True)


@pytest.fixture(scope="module")
def maze():
    task = tasks.get("maze-notes")
    for instance in task.instances("test", 10, seed=3):  # the first with three routes of distinct vectors
        routes = task.demonstrations(instance, 3, np.random.default_rng(0)).split("|")
        single = np.array([task.score(instance, [task.parse(instance, r, 1)[0]])[0] for r in routes])
        if single.any(axis=1).all() and len({tuple(v) for v in single}) == 3:
            return task, instance, routes, single
    raise AssertionError("no test maze with three distinct demonstration vectors")


def test_a_repeated_route_keeps_its_vector_at_evaluation_and_earns_nothing_in_training(maze):
    task, instance, (a, b, _), single = maze
    text = f"{a}|{a}|{b}"
    trained, ok = score_completion(task, instance, text, True, 3, TRAINING)
    assert ok and np.allclose(trained, [single[0], single[1], np.zeros(4)])
    evaluated, ok = score_completion(task, instance, text, True, 3, EVALUATION)
    assert ok and np.allclose(evaluated, [single[0], single[0], single[1]])
    deduped, _ = score_completion(task, instance, text, True, 3, BY_ANSWER)
    assert np.allclose(deduped, [single[0], np.zeros(4), single[1]])


def test_route_by_route_a_malformed_or_missing_route_scores_zero_alone(maze):
    task, instance, (a, b, c), single = maze
    for scoring in (EVALUATION, BY_ANSWER):
        matrix, ok = score_completion(task, instance, f"{a}|x9?|{c}", True, 3, scoring)
        assert not ok and np.allclose(matrix, [single[0], np.zeros(4), single[2]])
        matrix, ok = score_completion(task, instance, f"{a}|{b}", True, 3, scoring)  # too few routes
        assert not ok and np.allclose(matrix, [single[0], single[1], np.zeros(4)])
        matrix, _ = score_completion(task, instance, f"{a}|{b}|{c}|{a}", True, 3, scoring)  # too many: the first 3
        assert np.allclose(matrix, single)
        matrix, ok = score_completion(task, instance, f"{a}|{b}|{c[:5]}", False, 3, scoring)  # cut off in route 3
        assert not ok and np.allclose(matrix, [single[0], single[1], np.zeros(4)])
    for text, finished in ((f"{a}|x9?|{c}", True), (f"{a}|{b}", True), (f"{a}|{b}|{c[:5]}", False)):
        assert not score_completion(task, instance, text, finished, 3, TRAINING)[0].any()  # the whole set zero


def test_chat_routes_are_split_by_their_tags():
    task = tasks.get("maze-chat")
    instance = task.instances("test", 1)[0]
    good = task.demonstrations(instance, 2, np.random.default_rng(0))
    first = good.split("\n")[0]
    broken = first + "\n<route_2>U X</route_2>"
    matrix, ok = score_completion(task, instance, broken, True, 2, EVALUATION)
    assert not ok and matrix[0].any() and not matrix[1].any()
    assert not score_completion(task, instance, broken, True, 2, TRAINING)[0].any()


def test_a_task_that_cannot_split_its_answers_scores_the_whole_set():
    task, inst = CharMix(), CharMix().instances("train", 1)[0]
    matrix, ok = score_completion(task, inst, "ab|ab|12", True, 3, EVALUATION)
    assert ok and np.allclose(matrix, [[1, 0], [1, 0], [0, 1]])  # the repeat keeps its vector
    assert not score_completion(task, inst, "ab|12", True, 3, EVALUATION)[0].any()  # no split: the set fails


def test_the_training_flag_turns_on_route_by_route_scoring():
    base = dict(task="maze-notes", algo="vpo", init="x", out="y")
    assert scoring_for(TrainConfig(**base)) == TRAINING
    assert scoring_for(TrainConfig(**base, score_by_answer=True)) == BY_ANSWER


def test_diversity_over_valid_answers_and_best_over_the_oracle():
    vectors = np.array([[[1, 0], [0, 1], [0, 0], [0, 0]],  # two valid answers 2 apart, two zero rows
                        [[1, 1], [1, 1], [1, 1], [1, 1]]], dtype=float)
    columns = summary.per_instance(vectors, np.ones(2), np.array([0.5, 0.0]), [1, 4])
    assert columns["diversity_valid"] == pytest.approx([2.0, 0.0])
    assert columns["diversity"][0] == pytest.approx((2 * 2 + 8 * 1) / 12)  # zero rows count as points
    assert columns["best@4/oracle"] == pytest.approx([1.0, 1.0])  # 0.5 / 0.5; an optimum of 0: 1
    half = summary.per_instance(vectors[:1] / 2, np.ones(2), np.array([0.5]), [4])
    assert half["best@4/oracle"] == pytest.approx([0.5])


class Rendezvous:
    """The maze task, as a `Concurrent` task whose first two `score` calls must overlap: each
    waits at a barrier for the other (a sequential caller breaks it)."""

    scoring_workers = 2

    def __init__(self, task):
        import threading

        self.task, self.barrier, self.lock, self.calls = task, threading.Barrier(2, timeout=10), threading.Lock(), 0
        self.name, self.objectives, self.weights = task.name, task.objectives, task.weights

    def parse(self, instance, text, m=1):
        return self.task.parse(instance, text, m)

    def answer_texts(self, text):
        return self.task.answer_texts(text)

    def score(self, instance, answers):
        with self.lock:
            self.calls += 1
            first = self.calls <= 2
        if first:
            self.barrier.wait()
        return self.task.score(instance, answers)


def test_score_many_matches_score_completion_and_overlaps_a_concurrent_tasks_calls(maze):
    from tasks.base import Concurrent
    from tasks.completions import score_many

    task, instance, (a, b, c), _ = maze
    texts = [f"{a}|{b}|{c}", f"{a}|{a}|{b}", "not a route", f"{c}|{b}|{a}"]
    rows = [(instance, text, True) for text in texts]
    expected = [score_completion(task, instance, text, True, 3, EVALUATION) for text in texts]
    rendezvous = Rendezvous(task)
    assert isinstance(rendezvous, Concurrent) and not isinstance(task, Concurrent)
    for scorer in (task, rendezvous):  # sequentially, then from two threads whose calls meet at the barrier
        matrices, parsed = score_many(scorer, rows, 3, EVALUATION)
        assert np.array_equal(matrices, np.array([m for m, _ in expected]))
        assert parsed.tolist() == [ok for _, ok in expected]
