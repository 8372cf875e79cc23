import numpy as np
import pytest

from evo.features import as_dict, feature_values, required_extras
from evo.scores import BadOutput
from evo.database import FeatureConfig

OBJECTIVES = ("speed", "accuracy")
FEATURES = (
    FeatureConfig("length", "code_length", (0.0, 100.0), 10),
    FeatureConfig("acc", "objective:accuracy", (0.0, 1.0), 5),
    FeatureConfig("calls", "scorer:calls", (0.0, 50.0), 5),
)


def test_values_come_from_code_scores_and_extras_in_feature_order():
    values = feature_values(FEATURES, "x = 1\n", np.array([0.2, 0.9]), {"calls": 7.0, "other": 1.0}, OBJECTIVES)
    assert values.dtype == np.float64
    assert values.tolist() == [6.0, 0.9, 7.0]
    assert as_dict(FEATURES, values) == {"length": 6.0, "acc": 0.9, "calls": 7.0}


def test_values_are_raw_not_binned_or_clipped():
    values = feature_values(FEATURES, "y" * 500, np.array([0.0, 3.5]), {"calls": -4.0}, OBJECTIVES)
    assert values.tolist() == [500.0, 3.5, -4.0]


def test_a_missing_scorer_key_is_bad_output():
    with pytest.raises(BadOutput, match="'calls'"):
        feature_values(FEATURES, "", np.array([0.0, 0.0]), {}, OBJECTIVES)


def test_required_extras_are_the_scorer_sources():
    assert required_extras(FEATURES) == ("calls",)
    assert required_extras(FEATURES[:2]) == ()


def test_no_features_gives_an_empty_vector():
    assert feature_values((), "code", np.array([1.0, 1.0]), {}, OBJECTIVES).shape == (0,)
