"""Feature values of a candidate for the MAP-Elites archive: raw floats in the spec's
[features.*] order. Binning (with the fixed ranges) is the grid archive's job."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from evo.scores import BadOutput

if TYPE_CHECKING:
    from evo.database.config import FeatureConfig


class MissingFeature(BadOutput):
    """A feature reads a scorer key the scorer did not return."""


def required_extras(features: Sequence[FeatureConfig]) -> tuple[str, ...]:
    """The scorer keys that every successful evaluation must report."""
    return tuple(f.source.removeprefix("scorer:") for f in features if f.source.startswith("scorer:"))


def feature_values(
    features: Sequence[FeatureConfig],
    code: str,
    scores: np.ndarray,
    extras: Mapping[str, float],
    objectives: Sequence[str],
) -> np.ndarray:
    """One float per feature. Raises MissingFeature (a BadOutput) when a `scorer:<key>` is missing."""
    values = np.empty(len(features), dtype=np.float64)
    for i, feature in enumerate(features):
        kind, _, key = feature.source.partition(":")
        if kind == "code_length":
            values[i] = len(code)
        elif kind == "objective":
            values[i] = scores[list(objectives).index(key)]
        elif kind == "scorer":
            if key not in extras:
                raise MissingFeature(f"feature {feature.name!r} needs scorer key {key!r}, which the scorer did not return")
            values[i] = extras[key]
        else:
            raise ValueError(f"unknown feature source {feature.source!r}")
    return values


def as_dict(features: Sequence[FeatureConfig], values: np.ndarray) -> dict[str, float]:
    return {feature.name: float(value) for feature, value in zip(features, values)}
