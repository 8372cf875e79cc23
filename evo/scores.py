"""The score-vector contract shared by the sandbox, the database and the loop.

A score vector is a 1-D float64 array in the problem's declared objective order, higher is
better. A failed evaluation is not a vector but a `Failure` with a kind and a message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

FAILURE_KINDS = (
    "syntax",  # the candidate does not parse
    "exception",  # the candidate or the scorer raised
    "timeout",  # wall-clock or CPU limit
    "memory",  # memory cap
    "killed",  # the worker died (signal, os._exit, ...)
    "bad_output",  # the scorer returned something that is not a valid score vector
    "duplicate",  # rejected before evaluation
    "too_large",  # rejected before evaluation: over [search] max_program_bytes
)


@dataclass(frozen=True)
class Failure:
    kind: str
    message: str

    def __post_init__(self) -> None:
        if self.kind not in FAILURE_KINDS:
            raise ValueError(f"unknown failure kind {self.kind!r}; expected one of {FAILURE_KINDS}")
        if isinstance(self.message, str):  # any text the candidate raised is storable
            object.__setattr__(self, "message", storable(self.message))


@dataclass(frozen=True)
class Evaluation:
    """The outcome of evaluating one candidate: exactly one of `scores` and `failure` is set."""

    scores: np.ndarray | None
    failure: Failure | None = None
    extras: Mapping[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    output: str = ""  # captured (truncated) stdout/stderr of the evaluation
    feedback: str = ""  # the scorer's text under FEEDBACK_KEY (at most MAX_FEEDBACK_CHARS)
    stage: int = 1  # the cascade stage reached (1: the first scorer; 0: no scorer answered)

    def __post_init__(self) -> None:
        for name in ("output", "feedback"):  # whatever a candidate printed: storable in SQLite and JSON
            if isinstance(getattr(self, name), str):
                object.__setattr__(self, name, storable(getattr(self, name)))

    @property
    def ok(self) -> bool:
        return self.failure is None

    @classmethod
    def failed(cls, kind: str, message: str, seconds: float = 0.0, output: str = "", stage: int = 0,
               feedback: str = "") -> "Evaluation":
        """A failure; `feedback`: what the scorer added to it (its artifacts' text, e.g. a traceback)."""
        return cls(scores=None, failure=Failure(kind, message), seconds=seconds, output=output, stage=stage,
                   feedback=feedback)


MAX_MAGNITUDE = 1e100  # a score or extra beyond this is not a measurement (and sums of them would overflow)
MAX_WEIGHT_SUM = 1e200  # objective weights sum to at most this: MAX_MAGNITUDE x it is finite
MAX_EXTRAS = 256  # extra keys a scorer may return (features read a few)
MAX_KEY_CHARS = 200


FEEDBACK_KEY = "feedback"  # a scorer's text for the policy, beside its objectives
MAX_FEEDBACK_CHARS = 8000  # kept per evaluation (prompts show less: evo/feedback.py)


class BadOutput(ValueError):
    """A scorer's return value is not a valid score vector."""


class ScorerFailed(Exception):
    """The scorer reported a failure itself: a string under ERROR_KEY in its result, with the
    text of its artifacts ('' when none: an OpenEvolve traceback is kept with the failure)."""

    def __init__(self, message: str, artifacts: str = "") -> None:
        super().__init__(message)
        self.artifacts = artifacts


ERROR_KEY = "error"  # a scorer's own failure message (OpenEvolve evaluators return it beside zeros)
MAX_ARTIFACTS = 64


def unwrap(raw: object, objectives: Sequence[str]) -> tuple[object, str]:
    """A scorer's result as a mapping or sequence, and the text its artifacts add to the
    feedback ('' when none). Accepts, without importing OpenEvolve, an object with a
    `metrics` mapping and an optional `artifacts` mapping (its `EvaluationResult`): the
    metrics are the result, the artifacts become feedback lines `name: value`. A non-empty
    string under ERROR_KEY (not an objective) raises ScorerFailed with it and the artifacts'
    text; an empty one or None is dropped."""
    artifacts = ""
    if not isinstance(raw, (Mapping, Sequence, np.ndarray)) and isinstance(getattr(raw, "metrics", None), Mapping):
        found = getattr(raw, "artifacts", None)
        artifacts = _artifact_text(found) if isinstance(found, Mapping) else ""
        raw = dict(raw.metrics)  # type: ignore[attr-defined]
    if isinstance(raw, Mapping) and ERROR_KEY in raw and ERROR_KEY not in objectives:
        error = raw[ERROR_KEY]
        if isinstance(error, str) and error.strip():
            raise ScorerFailed(storable(" ".join(error.split())[:2000]), artifacts)
        if error is None or isinstance(error, str):  # no error: not an extra either
            raw = {key: value for key, value in raw.items() if key != ERROR_KEY}
    return raw, artifacts


def _artifact_text(artifacts: Mapping) -> str:
    lines = []
    for name, value in list(artifacts.items())[:MAX_ARTIFACTS]:
        shown = f"({len(value)} bytes)" if isinstance(value, (bytes, bytearray)) else str(value)
        lines.append(f"{str(name)[:MAX_KEY_CHARS]}: {shown[:MAX_FEEDBACK_CHARS]}")
    return "\n".join(lines)


def oriented(scores: np.ndarray, objectives: Sequence[str], minimize: Sequence[str]) -> np.ndarray:
    """`scores` with the objectives in `minimize` negated: a scorer's real values become the
    higher-is-better vector the search uses, and back (the same map both ways)."""
    if not minimize:
        return np.asarray(scores, dtype=np.float64)
    signs = np.array([-1.0 if name in minimize else 1.0 for name in objectives])
    return np.asarray(scores, dtype=np.float64) * signs


def real_values(scores: np.ndarray, objectives: Sequence[str], minimize: Sequence[str]) -> dict[str, float]:
    """The objectives by name as the scorer reported them (minimized ones un-negated)."""
    return dict(zip(objectives, map(float, oriented(scores, objectives, minimize))))


def split_feedback(raw: object, objectives: Sequence[str]) -> tuple[object, str]:
    """A scorer's result without its FEEDBACK_KEY text, and that text ('' when absent), cut
    to MAX_FEEDBACK_CHARS and made storable (lone surrogates replaced). A non-string
    feedback raises BadOutput; an objective named like the key stays an objective."""
    if not isinstance(raw, Mapping) or FEEDBACK_KEY not in raw or FEEDBACK_KEY in objectives:
        return raw, ""
    rest = {key: value for key, value in raw.items() if key != FEEDBACK_KEY}
    return rest, feedback_text(raw[FEEDBACK_KEY])


def feedback_text(text: object) -> str:
    """A feedback value as stored: a string cut to MAX_FEEDBACK_CHARS and made storable;
    anything else raises BadOutput."""
    if not isinstance(text, str):
        raise BadOutput(f"scorer result's {FEEDBACK_KEY!r} is {type(text).__name__}, expected a string")
    return storable(text[:MAX_FEEDBACK_CHARS])


def storable(text: str) -> str:
    """`text` as valid UTF-8 (lone surrogates become '?'), so SQLite and JSON take it."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _as_float(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise BadOutput(f"objective {name[:MAX_KEY_CHARS]!r} is {type(value).__name__}, expected a number")
    try:
        in_range = -MAX_MAGNITUDE <= value <= MAX_MAGNITUDE  # exact for huge ints (no float() overflow)
    except (TypeError, ValueError, OverflowError):
        in_range = False
    if not in_range:
        shown = f"{value:.3g}" if isinstance(value, (float, np.floating)) else f"an {type(value).__name__} out of range"
        raise BadOutput(f"objective {name[:MAX_KEY_CHARS]!r} is {shown}, expected a finite number of magnitude <= {MAX_MAGNITUDE:g}")
    return float(value)


def to_vector(raw: object, objectives: Sequence[str]) -> tuple[np.ndarray, dict[str, float]]:
    """Validate a scorer's return value: a mapping name->number or a sequence of numbers.

    Returns the score vector in objective order and the extra numeric keys (for features).
    Raises `BadOutput` with a one-line reason, in time linear in the result's size: at most
    MAX_EXTRAS extra keys of at most MAX_KEY_CHARS characters, values finite and within
    +-MAX_MAGNITUDE.
    """
    if isinstance(raw, Mapping):
        if len(raw) > len(objectives) + MAX_EXTRAS:
            raise BadOutput(f"scorer result has {len(raw)} keys; at most {MAX_EXTRAS} beyond the objectives")
        missing = [name for name in objectives if name not in raw]
        if missing:
            raise BadOutput(f"scorer result misses objective(s) {missing}; it has keys {sorted(map(str, raw))[:10]}")
        vector = np.array([_as_float(name, raw[name]) for name in objectives], dtype=np.float64)
        names = set(objectives)
        extras: dict[str, float] = {}
        for key, value in raw.items():
            if not isinstance(key, str) or len(key) > MAX_KEY_CHARS:
                shown = repr(key[:60]) if isinstance(key, str) else type(key).__name__
                raise BadOutput(f"scorer result has a key that is not a string of <= {MAX_KEY_CHARS} characters: {shown}")
            if key not in names:
                extras[key] = _as_float(key, value)
        return vector, extras
    if isinstance(raw, (str, bytes)) or not isinstance(raw, (Sequence, np.ndarray)):
        raise BadOutput(f"scorer returned {type(raw).__name__}, expected a mapping name->float or a sequence of floats")
    if (raw.size if isinstance(raw, np.ndarray) else len(raw)) != len(objectives):
        size = raw.size if isinstance(raw, np.ndarray) else len(raw)
        raise BadOutput(f"scorer returned {size} values, expected {len(objectives)} ({', '.join(objectives)})")
    values = list(np.asarray(raw).ravel()) if isinstance(raw, np.ndarray) else list(raw)
    return np.array([_as_float(n, v) for n, v in zip(objectives, values)], dtype=np.float64), {}


def minimize_problem(minimize: Sequence[object], objectives: Sequence[str]) -> str:
    """'' when `minimize` names distinct objectives of `objectives`; else what it must be."""
    if all(isinstance(name, str) and name in objectives for name in minimize) and len(set(minimize)) == len(minimize):
        return ""
    return f"distinct names of objectives (of {list(objectives)})"


def weights_problem(weights: Sequence[object], size: int) -> str:
    """'' when `weights` can weigh score vectors of `size` objectives: `size` finite numbers >= 0
    whose sum is positive and small enough that a weighted sum of scores within MAX_MAGNITUDE
    stays finite; else what they must be."""
    wanted = (f"{size} non-negative numbers with a positive sum of at most {MAX_WEIGHT_SUM:g} "
              "(weighted scores must stay finite)")
    numbers = [float(w) for w in weights if isinstance(w, (int, float)) and not isinstance(w, bool)]
    if len(weights) != size or len(numbers) != size or not all(math.isfinite(w) and w >= 0 for w in numbers):
        return wanted
    total = sum(numbers)  # inf when it overflows
    return "" if 0 < total <= MAX_WEIGHT_SUM else wanted


def scalarize(scores: np.ndarray | Sequence[float], weights: np.ndarray | Sequence[float]) -> np.ndarray:
    """The problem's scalar: the weighted mean of the objectives (works on (..., d) arrays)."""
    weights = np.asarray(weights, dtype=np.float64)
    return np.asarray(scores, dtype=np.float64) @ weights / weights.sum()
