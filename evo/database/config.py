"""The database's configuration: one frozen dataclass per [search] / [features.*] table of a spec.

Field names follow the spec keys in DESIGN.md so the loop maps a spec onto these one to one;
the database does not import the spec module.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from evo.database.topology import TOPOLOGIES
from evo.errors import UserError
from evo.selection import check_name, check_options

FEATURE_SOURCES = ("code_length", "objective:<name>", "scorer:<key>")


@dataclass(frozen=True)
class FeatureConfig:
    """One MAP-Elites dimension with a FIXED range and number of bins (values outside are clipped)."""

    name: str
    source: str = "code_length"
    range: tuple[float, float] = (0.0, 2000.0)
    bins: int = 10

    def __post_init__(self) -> None:
        low, high = (float(x) for x in self.range)
        object.__setattr__(self, "range", (low, high))
        if not low < high:
            raise UserError(f"feature {self.name!r}: range must be [low, high] with low < high, got {list(self.range)}")
        if int(self.bins) != self.bins or self.bins < 1:
            raise UserError(f"feature {self.name!r}: bins must be a positive integer, got {self.bins!r}")
        kind = self.source.split(":", 1)[0]
        if self.source != "code_length" and (kind not in ("objective", "scorer") or not self.source.split(":", 1)[1:] or not self.source.split(":", 1)[1]):
            raise UserError(f"feature {self.name!r}: source must be one of {', '.join(FEATURE_SOURCES)}, got {self.source!r}")


@dataclass(frozen=True)
class DatabaseConfig:
    objectives: tuple[str, ...]
    weights: tuple[float, ...] | None = None  # None: equal weights
    features: tuple[FeatureConfig, ...] = ()
    islands: int = 4
    topology: str | tuple[tuple[int, int], ...] = "ring"
    migration_interval: int = 25
    migration_size: int = 2
    reset_interval: int = 0  # 0 = never
    selection: str = "lexicase"
    selection_options: dict[str, Any] = field(default_factory=dict)
    parents: int = 2
    inspirations: int = 2
    population_cap: int = 1000  # per island; 0 = unlimited; a cell's elite is never evicted
    seed: int = 0  # random-regular topology and island resets

    def __post_init__(self) -> None:
        object.__setattr__(self, "objectives", tuple(self.objectives))
        object.__setattr__(self, "features", tuple(self.features))
        if not self.objectives or len(set(self.objectives)) != len(self.objectives):
            raise UserError(f"objectives must be distinct names, got {list(self.objectives)}")
        if self.weights is not None:
            weights = tuple(float(w) for w in self.weights)
            if len(weights) != len(self.objectives) or min(weights) < 0 or sum(weights) <= 0:
                raise UserError(f"weights must be {len(self.objectives)} non-negative numbers with a positive sum, got {list(weights)}")
            object.__setattr__(self, "weights", weights)
        if not isinstance(self.topology, str):
            object.__setattr__(self, "topology", tuple(tuple(int(x) for x in edge) for edge in self.topology))
        self._check_counts()
        for feature in self.features:
            if feature.source.startswith("objective:") and feature.source[10:] not in self.objectives:
                raise UserError(f"feature {feature.name!r} uses unknown objective {feature.source[10:]!r}; objectives are {list(self.objectives)}")
        check_name(self.selection)
        check_options(self.selection, dict(self.selection_options))

    def _check_counts(self) -> None:
        for name in ("islands", "parents"):
            if int(getattr(self, name)) < 1:
                raise UserError(f"search.{name} must be >= 1, got {getattr(self, name)!r}")
        for name in ("migration_interval", "migration_size", "reset_interval", "inspirations", "population_cap"):
            if int(getattr(self, name)) < 0:
                raise UserError(f"search.{name} must be >= 0, got {getattr(self, name)!r}")
        if isinstance(self.topology, str) and self.topology not in TOPOLOGIES:
            raise UserError(f"search.topology must be one of {', '.join(TOPOLOGIES)} or a list of [a, b] edges, got {self.topology!r}")

    @property
    def weight_vector(self) -> tuple[float, ...]:
        return self.weights if self.weights is not None else (1.0,) * len(self.objectives)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "DatabaseConfig":
        raw = json.loads(text)
        raw["features"] = tuple(FeatureConfig(**{**f, "range": tuple(f["range"])}) for f in raw["features"])
        if not isinstance(raw["topology"], str):
            raw["topology"] = tuple(tuple(edge) for edge in raw["topology"])
        return cls(**raw)
