"""Symbolic regression: benchmark problems, safe expressions, region rewards, specs."""

from __future__ import annotations

import hashlib
import time

import numpy as np
import pytest

import tasks
from tasks.base import ParseError, TemplateMismatch
from tasks.symreg import SymregTask, problem
from tasks.symreg.data import REGIONS, Dataset, arrays, region_scores
from tasks.symreg.expressions import compile_expression
from tasks.symreg.problems import FEYNMAN, NGUYEN


@pytest.fixture(scope="module")
def task():
    return tasks.get("symreg")


def test_benchmark_has_nguyen_1_to_12_and_ten_feynman_equations():
    assert [p.name for p in NGUYEN] == [f"nguyen-{i}" for i in range(1, 13)]
    assert len(FEYNMAN) >= 10
    assert problem("nguyen-7").ranges == ((0, 2),) and problem("nguyen-8").ranges == ((0, 4),)
    assert problem("feynman-I.10.7").ranges == ((1, 5), (1, 2), (3, 10))


def test_every_ground_truth_scores_full_marks_and_is_recovered(task):
    instances = task.instances("benchmark", len(task.benchmark))
    for instance in instances:
        formula = instance.data[0].formula
        scores = task.score(instance, [formula])
        assert scores.shape == (1, REGIONS)
        np.testing.assert_array_equal(scores[0], np.ones(REGIONS), err_msg=formula)
        assert task.recovered(instance, formula)
        assert scores[0] @ task.weights / task.weights.sum() == task.oracle_best(instance)


def test_near_misses_are_not_recovered_and_score_below_one(task):
    instance = task.instances("benchmark", 1)[0]  # nguyen-1
    near = instance.data[0].formula + " + 0.001"
    assert not task.recovered(instance, near)
    assert np.all(task.score(instance, [near])[0] < 1.0)
    assert task.recovered(instance, "x0*(1 + x0 + x0**2)")  # same function, another form


def test_a_partial_fit_is_a_specialist():
    data = Dataset("x0**3 + x0**2 + x0", ((-1.0, 1.0),), seed=0)
    table = arrays(data)
    prediction = np.where(table.X_eval[:, 0] < 0, table.y_eval, table.y_eval + 1.0)
    scores = region_scores(prediction, data)
    assert np.all(scores[:4] == 1.0) and np.all(scores[4:] < 0.7)


def test_regions_tile_the_box_for_each_arity():
    for formula, ranges in [("x0", ((0, 1),)), ("x0 + x1", ((0, 1),) * 2), ("x0*x1*x2*x3", ((1, 5),) * 4)]:
        data = Dataset(formula, ranges, seed=1)
        table = arrays(data)
        assert np.bincount(table.region).tolist() == [len(table.region) // REGIONS] * REGIONS
        lows, highs = np.array(ranges).T
        assert np.all(table.X_eval >= lows) and np.all(table.X_eval <= highs)


def test_parser_is_strict_and_safe(task):
    instance = task.instances("benchmark", 9)[8]  # nguyen-9, two variables
    assert task.parse(instance, "sin(x0) | x1**2 | 2*pi", 3) == ["sin(x0)", "x1**2", "2*pi"]
    with pytest.raises(TemplateMismatch):
        task.parse(instance, "x0 | x1", 3)
    for bad in ["", "x2", "__import__('os')", "x0.real", "lambda: 1", "sin", "abs(x0)", "x0 if x0 else x1",
                "sin(x0, x1)", "[x0]"]:
        with pytest.raises(ParseError):
            task.parse(instance, bad, 1)


def test_duplicates_and_broken_expressions_score_zero(task):
    instance = task.instances("benchmark", 1)[0]
    scores = task.score(instance, ["x0 + 1", "x0+1", "log(x0 - 5)", "not valid"])
    assert scores[0].all() and not scores[1].any() and not scores[2].any() and not scores[3].any()


def test_huge_powers_do_not_hang():
    started = time.time()
    values = compile_expression("2**10**10 + x0", 1)(np.ones((4, 1)))
    assert time.time() - started < 1.0 and not np.isfinite(values).any()


def test_train_instances_are_random_formulas_with_demonstrations(task):
    train = task.instances("train", 10, seed=3)
    assert len({i.data[0].formula for i in train}) > 5
    rng = np.random.default_rng(0)
    for instance in train:
        text = task.demonstrations(instance, 3, rng)
        answers = task.parse(instance, text, 3)
        assert instance.data[0].formula in answers
        assert task.prompt(instance, 3).endswith("exprs 3\n")


def test_unknown_problem_names_are_reported():
    with pytest.raises(KeyError):
        problem("nguyen-13")
    with pytest.raises(ValueError):
        SymregTask().instances("valid", 1)


def test_the_benchmark_split_repeats_the_benchmark_with_other_data():
    task = SymregTask()
    instances = task.instances("benchmark", len(task.benchmark) + 1)
    first, again = instances[0].data, instances[-1].data
    assert first[0] == again[0] and first[1].seed != again[1].seed


def test_the_train_split_as_the_model_sees_it_is_pinned(task):
    """Prompts, demonstrations and scores of train instances, byte for byte: the warm-up and
    the RL runs started from it were trained on exactly these (tests re-take it only with them)."""
    digest = hashlib.sha256()
    for seed in (0, 45):
        for instance in task.instances("train", 6, seed=seed):
            rng = np.random.default_rng([seed, instance.index])
            for m in (1, 3):
                digest.update(task.prompt(instance, m).encode())
                digest.update(task.demonstrations(instance, m, rng).encode())
            digest.update(task.score(instance, [instance.data[0].formula, "x0 + 1", "sin(x0)*2"]).tobytes())
    assert digest.hexdigest() == "f4feaa9e4e24b64f0a2cf5666c5ae710520b2fe4c27270a5ebbeee96714b532c"


def test_the_test_split_is_seeded_held_out_formulas_whose_truth_is_the_oracle(task):
    test = task.instances("test", 120, seed=4)
    assert [i.data for i in test[:20]] == [i.data for i in task.instances("test", 20, seed=4)]
    assert [i.data[0].formula for i in task.instances("test", 20, seed=5)] != [i.data[0].formula for i in test[:20]]
    train = task.instances("train", 120, seed=4)
    assert all(a.data[1] != b.data[1] for a, b in zip(test, train))  # another stream: other data
    assert len({i.data[0].formula for i in test}) > 60
    for instance in test:
        formula = instance.data[0].formula
        np.testing.assert_array_equal(task.score(instance, [formula])[0], np.ones(REGIONS), err_msg=formula)
        assert task.recovered(instance, formula)
        np.testing.assert_array_equal(task.oracle_front(instance), np.ones((1, REGIONS)))
        assert task.oracle_best(instance) == 1.0


def test_the_held_out_generator_rejects_flat_and_broken_formulas():
    from tasks.symreg.splits import well_posed

    box = ((-1.0, 1.0),)
    assert well_posed(Dataset("x0**2 + x0", box, seed=0)) and well_posed(Dataset("x1", box * 2, seed=0))
    assert not well_posed(Dataset("x0 - x0 + 2", box, seed=0))  # constant
    assert not well_posed(Dataset("x0 + sqrt(x0**2)", box, seed=0))  # 0 on the left half: flat regions
    assert not well_posed(Dataset("sqrt(x0)", box, seed=0))  # not finite on the left half
    assert not well_posed(Dataset("exp(10*x0)", ((0.0, 2.0),), seed=0))  # too large


def test_a_train_formula_outside_its_domain_somewhere_still_scores_numbers():
    """Train step 166 of seed 0 draws sqrt(x0 * x1 - x0 + 1) on [0, 2]^2, whose truth is NaN where
    the root's argument is negative: those points are left out, so every score is a number (a NaN
    reward made the advantages NaN and stopped a VPO run at that step)."""
    import tasks
    from tasks.symreg.data import arrays

    task = tasks.get("symreg")
    instance = next(i for i in task.instances("train", 8, seed=166) if not np.isfinite(arrays(i.data[1]).y_eval).all())
    scores = task.score(instance, [instance.data[0].formula, "x0", "1", "log(x0 - 5)"])
    assert np.isfinite(scores).all() and (scores >= 0).all() and (scores <= 1).all()
    assert (scores[0] == 1.0).all() and (scores[3] == 0.0).all()
