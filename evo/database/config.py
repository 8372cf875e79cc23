"""The search's configuration: one frozen dataclass per table of a spec the database reads.

`FeatureConfig` is one [features.NAME] table, `SearchSettings` the [search] table, and
`DatabaseConfig` composes them with the problem's objectives and weights and the run's seed.
The spec (evo/spec.py) builds these directly; the database does not import the spec module.
Each dataclass validates itself, so an API user gets the same rules as a spec file.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from evo.database.hashing import DEDUPE
from evo.database.topology import TOPOLOGIES
from evo.errors import UserError
from evo.scores import minimize_problem, weights_problem
from evo.selection import check_name, check_options

FEATURE_SOURCES = ("code_length", "objective:<name>", "scorer:<key>")
POLICY_CHOICES = ("weights", "ucb")  # how a run of several policies picks one per group (evo/policy_mix.py)
ANSWERS_BY = ("completion", "samples")  # how a proposal of m programs is asked for (evo/prompt_sets.py)


@dataclass(frozen=True)
class FeatureConfig:
    """One MAP-Elites dimension with a FIXED range and number of bins (values outside are clipped)."""

    name: str
    source: str = "code_length"  # "code_length" | "objective:<name>" | "scorer:<key>"
    range: tuple[float, float] = (0.0, 2000.0)
    bins: int = 10

    def __post_init__(self) -> None:
        low, high = (float(x) for x in self.range)
        object.__setattr__(self, "range", (low, high))
        if not low < high:
            raise UserError(f"feature {self.name!r}: range must be [low, high] with low < high, got {list(self.range)}")
        if int(self.bins) != self.bins or self.bins < 1:
            raise UserError(f"feature {self.name!r}: bins must be a positive integer, got {self.bins!r}")
        kind, _, key = self.source.partition(":")
        if self.source != "code_length" and (kind not in ("objective", "scorer") or not key):
            raise UserError(f"feature {self.name!r}: source must be one of {', '.join(FEATURE_SOURCES)}, got {self.source!r}")


@dataclass(frozen=True)
class SearchSettings:
    """The [search] table: islands and selection (read by the database), budget (by the loop)."""

    islands: int = 4
    topology: str | tuple[tuple[int, int], ...] = "ring"
    migration_interval: int = 25  # 0 = never
    migration_size: int = 2
    reset_interval: int = 0  # 0 = never
    selection: str = "lexicase"
    selection_options: Mapping[str, Any] = field(default_factory=dict)  # keyword options of the strategy
    parents: int = 2
    inspirations: int = 2
    population_cap: int = 1000  # programs per island; 0 = unlimited (a MAP-Elites cell's elite is kept)
    samples_per_prompt: int = 4
    iterations: int = 200
    target: float | None = None  # stop when the best scalar reaches it
    policy_weights: Mapping[str, float] = field(default_factory=dict)  # policy name -> weight (unnamed: 1)
    policy_choice: str = "weights"  # POLICY_CHOICES
    max_program_bytes: int = 65536  # a larger proposal fails as "too_large" before evaluation (prompts stay bounded)
    answers: int = 0  # programs per policy reply (a set); 0: the policy's own (a checkpoint's trained m, else 1)
    answers_by: str = "completion"  # "completion": m programs in ONE completion | "samples": m samples of one prompt

    # the least value of each count (the spec reads its rules from here too)
    MINIMUM: ClassVar[dict[str, int]] = {
        "islands": 1, "migration_interval": 0, "migration_size": 0, "reset_interval": 0, "parents": 1,
        "inspirations": 0, "population_cap": 0, "samples_per_prompt": 1, "iterations": 1, "max_program_bytes": 1,
        "answers": 0,
    }
    # the greatest (the spec reads it too): m programs per reply are m programs' worth of tokens and prompt
    MAXIMUM: ClassVar[dict[str, int]] = {"answers": 64}

    def __post_init__(self) -> None:
        if not isinstance(self.topology, str):
            object.__setattr__(self, "topology", tuple(tuple(int(x) for x in edge) for edge in self.topology))
        object.__setattr__(self, "selection_options", dict(self.selection_options))
        for name, low in self.MINIMUM.items():
            value, high = getattr(self, name), self.MAXIMUM.get(name)
            integer = isinstance(value, numbers.Integral) and not isinstance(value, bool)
            if not integer or not low <= int(value) <= (int(value) if high is None else high):
                rule = f"an integer in {low}..{high}" if high is not None else f"an integer >= {low}"
                meaning = " (0: the policy's own)" if name == "answers" else ""
                raise UserError(f"search.{name} must be {rule}{meaning}, got {value!r}"[:300])
            object.__setattr__(self, name, int(value))
        if isinstance(self.topology, str) and self.topology not in TOPOLOGIES:
            raise UserError(f"search.topology must be one of {', '.join(TOPOLOGIES)} or a list of [a, b] edges, got {self.topology!r}")
        check_name(self.selection)
        check_options(self.selection, dict(self.selection_options))
        self._check_policies()

    def _check_policies(self) -> None:
        object.__setattr__(self, "policy_weights", dict(self.policy_weights))
        for name, weight in self.policy_weights.items():
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight < 0:
                raise UserError(f"search.policy_weights: {name!r} needs a finite weight >= 0, got {weight!r}")
        if not math.isfinite(sum(self.policy_weights.values())):
            raise UserError(f"search.policy_weights must have a finite sum (they are normalized to probabilities), "
                            f"got {dict(self.policy_weights)!r}"[:300])
        if self.answers_by not in ANSWERS_BY:
            raise UserError(f"search.answers_by must be one of {', '.join(map(repr, ANSWERS_BY))}, got {self.answers_by!r}")
        if self.policy_choice not in POLICY_CHOICES:
            raise UserError(f"search.policy_choice must be one of {', '.join(map(repr, POLICY_CHOICES))}, got {self.policy_choice!r}")


@dataclass(frozen=True)
class DatabaseConfig:
    objectives: tuple[str, ...]
    weights: tuple[float, ...] | None = None  # None: equal weights
    features: tuple[FeatureConfig, ...] = ()
    search: SearchSettings = SearchSettings()
    seed: int = 0  # random-regular topology and island resets
    dedupe: str = "python"  # the duplicate key (evo.database.hashing.DEDUPE): "python" | "text" | "whitespace"
    minimize: tuple[str, ...] = ()  # objectives stored negated (lower is better): shown with their real values

    def __post_init__(self) -> None:
        if self.dedupe not in DEDUPE:
            raise UserError(f"dedupe must be one of {', '.join(DEDUPE)}, got {self.dedupe!r}")
        object.__setattr__(self, "objectives", tuple(self.objectives))
        object.__setattr__(self, "features", tuple(self.features))
        object.__setattr__(self, "minimize", tuple(self.minimize))
        if not self.objectives or len(set(self.objectives)) != len(self.objectives):
            raise UserError(f"objectives must be distinct names, got {list(self.objectives)}")
        problem = minimize_problem(self.minimize, self.objectives)
        if problem:
            raise UserError(f"minimize must be {problem}, got {list(self.minimize)}"[:300])
        if self.weights is not None:
            weights = tuple(float(w) for w in self.weights)
            problem = weights_problem(weights, len(self.objectives))
            if problem:
                raise UserError(f"weights must be {problem}, got {list(weights)}"[:300])
            object.__setattr__(self, "weights", weights)
        for feature in self.features:
            if feature.source.startswith("objective:") and feature.source[10:] not in self.objectives:
                raise UserError(f"feature {feature.name!r} uses unknown objective {feature.source[10:]!r}; objectives are {list(self.objectives)}")

    @property
    def weight_vector(self) -> tuple[float, ...]:
        return self.weights if self.weights is not None else (1.0,) * len(self.objectives)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "DatabaseConfig":
        """The stored config; a run stored before SearchSettings had its [search] keys at the top."""
        raw = json.loads(text)
        raw.setdefault("dedupe", "whitespace")  # a run stored before the AST key keeps its own
        searched = {f.name for f in fields(SearchSettings)}
        search = raw.pop("search", None) or {k: raw.pop(k) for k in list(raw) if k in searched}
        raw["features"] = tuple(FeatureConfig(**{**f, "range": tuple(f["range"])}) for f in raw["features"])
        return cls(**raw, search=SearchSettings(**search))
