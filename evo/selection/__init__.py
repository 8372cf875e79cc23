"""Parent selection over score vectors: pure, vectorized strategies and a registry of names.

`select(name, scores, k, rng, **options)` returns k member indices of `scores` (n, d), higher
is better. For repeated selections on the same population, build `Population(scores)` once
and pass it instead of the array: identical rows are merged once and everything that does not
change between selections is cached on it. A raw array is used as it is (each member its own
signature; Boltzmann still clusters), which is cheaper for a single call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from evo.errors import UserError
from evo.selection.lexicase import downsampled_lexicase, epsilon_lexicase, lexicase
from evo.selection.population import Population
from evo.selection.weighted import boltzmann, dalex, dirichlet, tournament, uniform

REGISTRY: dict[str, Callable[..., np.ndarray]] = {
    "uniform": uniform,
    "tournament": tournament,
    "boltzmann": boltzmann,
    "lexicase": lexicase,
    "epsilon-lexicase": epsilon_lexicase,
    "downsampled-lexicase": downsampled_lexicase,
    "dalex": dalex,
    "dirichlet": dirichlet,
}
NAMES = tuple(REGISTRY)
_OPTIONS = {name: tuple(inspect.signature(strategy).parameters)[3:] for name, strategy in REGISTRY.items()}


def options_of(name: str) -> tuple[str, ...]:
    """The keyword options a strategy accepts (besides scores, k and rng)."""
    check_name(name)
    return _OPTIONS[name]


def check_name(name: str) -> None:
    if name not in REGISTRY:
        raise UserError(f"unknown selection {name!r}; choose one of {', '.join(NAMES)}")


def check_options(name: str, options: dict[str, Any]) -> None:
    unknown = sorted(set(options) - set(options_of(name)))
    if unknown:
        raise UserError(f"selection {name!r} has no option {', '.join(unknown)}; it takes: {', '.join(options_of(name)) or 'none'}")


def select(
    name: str,
    scores: Population | np.ndarray,
    k: int,
    rng: np.random.Generator,
    *,
    lengths: np.ndarray | None = None,
    weights: np.ndarray | None = None,
    **options: Any,
) -> np.ndarray:
    """k indices into `scores` chosen by strategy `name` (lengths/weights: Boltzmann, tournament)."""
    check_options(name, options)
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if not isinstance(scores, Population):  # one-shot: only Boltzmann needs identical rows merged
        scores = Population(scores, lengths=lengths, weights=weights, grouped=name == "boltzmann")
    pop = scores
    if k == 0:
        return np.empty(0, dtype=np.intp)
    return np.asarray(REGISTRY[name](pop, k, rng, **options), dtype=np.intp)


__all__ = [
    "NAMES", "REGISTRY", "Population", "select", "options_of", "check_options", "check_name",
    "uniform", "tournament", "boltzmann", "lexicase", "epsilon_lexicase", "downsampled_lexicase", "dalex", "dirichlet",
]
