import math

import numpy as np
import pytest

from evo.scores import BadOutput, Evaluation, Failure, scalarize, to_vector

OBJ = ("a", "b")


def test_mapping_and_sequence_give_the_same_vector():
    v1, extras = to_vector({"a": 1, "b": 0.5, "len": 3}, OBJ)
    v2, _ = to_vector([1, 0.5], OBJ)
    assert v1.dtype == np.float64 and np.array_equal(v1, v2)
    assert extras == {"len": 3.0}


@pytest.mark.parametrize(
    "raw",
    [{"a": 1}, {"a": math.nan, "b": 1}, {"a": math.inf, "b": 1}, {"a": "1", "b": 1}, [1], [1, 2, 3], "ab", None, {"a": True, "b": 1}],
)
def test_bad_outputs_raise(raw):
    with pytest.raises(BadOutput):
        to_vector(raw, OBJ)


def test_scalarize_is_weighted_mean():
    assert scalarize(np.array([1.0, 0.0]), np.array([3.0, 1.0])) == pytest.approx(0.75)


def test_failure_kind_is_checked():
    assert not Evaluation.failed("timeout", "slow").ok
    with pytest.raises(ValueError):
        Failure("nope", "x")
