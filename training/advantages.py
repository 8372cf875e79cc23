"""Advantage estimators: pure functions over a rewards tensor, registered by name.

Every estimator maps `rewards` of shape (B, G, m, d) — prompts, rollouts per prompt,
answers per rollout, objectives — to advantages of shape (B, G), one scalar per rollout.
`weights` (d,) define the task's deployment scalar (the weighted mean); `rng` is the only
source of randomness. Broadcasting to tokens, masking and the loss live in the trainer.

Each registry entry says which prompt its rollouts answer (`Entry.prompt`): `single` (one
answer, m == 1), `set` (m answers in one completion) or `goal` (one answer to a prompt that
shows a Dirichlet weight, which the trainer draws per prompt group and passes as `goals`).
An entry with `front=True` scores a rollout against the front F of the program database its
prompt was built from (`front`, (B, p, d), padded with NaN rows: the Pareto front,
evo.metrics.front) and takes any m >= 1 answers per rollout.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeGuard

import numpy as np

from evo.scores import scalarize

EPS = 1e-6

Estimator = Callable[..., np.ndarray]
PROMPTS = ("single", "set", "goal")


@dataclass(frozen=True)
class Entry:
    """A registered estimator (callable like its function) and the prompt its rollouts answer."""

    function: Estimator
    prompt: str = "single"  # one of PROMPTS
    front: bool = False  # takes `front` (B, p, d): the front F of each prompt's program database

    def __post_init__(self) -> None:
        if self.prompt not in PROMPTS:
            raise ValueError(f"prompt must be one of {PROMPTS}, got {self.prompt!r}")

    @property
    def multi_answer(self) -> bool:
        return self.prompt == "set"

    @property
    def goal_conditioned(self) -> bool:
        return self.prompt == "goal"

    def __call__(self, rewards: np.ndarray, **kwargs) -> np.ndarray:
        return self.function(rewards, **kwargs)


REGISTRY: dict[str, Entry] = {}
INPUTS = ("weights", "rng", "goals", "front")  # keyword arguments the trainer supplies; the others are options


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Option:
    """The rule an estimator option's value obeys (checked before any training starts)."""

    what: str
    accepts: Callable[[object], bool]


OPTIONS: dict[str, Option] = {
    "K": Option("an integer >= 1", lambda v: _integer(v) and v >= 1),
    "alpha": Option("a finite number > 0", lambda v: _number(v) and v > 0),
    "sobol": Option("True or False", lambda v: isinstance(v, bool)),
    "k": Option("an integer >= 2 (or None: G // 2)", lambda v: v is None or (_integer(v) and v >= 2)),
    "eps": Option("a finite number > 0", lambda v: _number(v) and v > 0),
}


def option_names(function: Estimator) -> tuple[str, ...]:
    """An estimator's options: its keyword-only parameters the trainer does not supply."""
    return tuple(p.name for p in inspect.signature(function).parameters.values()
                 if p.kind is p.KEYWORD_ONLY and p.name not in INPUTS)


def register(name: str, prompt: str = "single", front: bool = False) -> Callable[[Estimator], Estimator]:
    def decorate(function: Estimator) -> Estimator:
        unruled = [option for option in option_names(function) if option not in OPTIONS]
        if unruled:
            raise ValueError(f"estimator {name}: option {unruled[0]!r} has no rule in OPTIONS")
        REGISTRY[name] = Entry(function, prompt, front)
        return function

    return decorate


def option_problem(name: str, options: Mapping[str, object], group: int | None = None) -> str:
    """What is wrong with estimator `name`'s `options` ('' when nothing): an option it does not
    take, or a value its rule refuses; with `group` (G, rollouts per prompt) also maxk's k > G."""
    known = option_names(entry(name).function)
    unknown = sorted(set(options) - set(known), key=str)
    if unknown:
        return f"{', '.join(map(str, unknown))} (it takes: {', '.join(known) or 'none'})"
    for key, value in options.items():
        if not OPTIONS[key].accepts(value):
            return f"{key} must be {OPTIONS[key].what}, got {value!r}"[:200]
    k = options.get("k")
    if group is not None and _integer(k) and k > group:
        return f"k must be <= G, the rollouts per prompt ({group}), got {options['k']}"
    return ""


RENAMED = {"vpo_archive": "vpo_front"}  # an estimator's earlier name -> its name (stored runs are read with it)


class UnknownEstimator(ValueError):
    """A name the registry does not hold (the one check of an estimator's name)."""


def entry(name: str) -> Entry:
    """The registered estimator `name`; UnknownEstimator, with the registered names, otherwise."""
    if name in RENAMED:
        raise UnknownEstimator(f"estimator {name!r} is called {RENAMED[name]!r} now (it scores against the front F)")
    if name not in REGISTRY:
        raise UnknownEstimator(f"unknown estimator {name!r}; registered: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


def stored_name(name: str) -> str:
    """An estimator name read from a stored run (train_config.json, online/settings.json): its current name."""
    return RENAMED.get(name, name)


def compute(name: str, rewards: np.ndarray, *, weights: np.ndarray, rng: np.random.Generator, **options) -> np.ndarray:
    """Advantages (B, G) of the estimator called `name` (a goal-conditioned one also takes
    `goals`, the (B, d) weights its prompts showed)."""
    estimator = entry(name)
    rewards = np.asarray(rewards, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    if rewards.ndim != 4:
        raise ValueError(f"rewards must have shape (B, G, m, d), got {rewards.shape}")
    if weights.shape != (rewards.shape[3],):
        raise ValueError(f"weights must have shape ({rewards.shape[3]},), got {weights.shape}")
    if not estimator.multi_answer and not estimator.front and rewards.shape[2] != 1:
        raise ValueError(f"{name} is a single-answer estimator; rewards have m={rewards.shape[2]}")
    return estimator(rewards, weights=weights, rng=rng, **options)


def zscore(values: np.ndarray, eps: float = EPS) -> np.ndarray:
    """Within-group z-score over the last axis with the population std; zero when std < eps."""
    std = values.std(axis=-1, keepdims=True)
    centred = values - values.mean(axis=-1, keepdims=True)
    return np.where(std < eps, 0.0, centred / (std + eps))


@register("grpo")
def grpo(rewards: np.ndarray, *, weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return zscore(scalarize(rewards[:, :, 0], weights))


@register("dr_grpo")
def dr_grpo(rewards: np.ndarray, *, weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    s = scalarize(rewards[:, :, 0], weights)
    return s - s.mean(axis=1, keepdims=True)


@register("rloo")
def rloo(rewards: np.ndarray, *, weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    s = scalarize(rewards[:, :, 0], weights)
    g = s.shape[1]
    if g < 2:
        return np.zeros_like(s)
    return s - (s.sum(axis=1, keepdims=True) - s) / (g - 1)


@register("maxrl")
def maxrl(rewards: np.ndarray, *, weights: np.ndarray, rng: np.random.Generator, eps: float = EPS) -> np.ndarray:
    s = scalarize(rewards[:, :, 0], weights)
    mean = s.mean(axis=1, keepdims=True)
    return (s - mean) / (mean + eps)


@register("gdpo")
def gdpo(rewards: np.ndarray, *, weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per-objective group z-scores, summed with the task weights, whitened over the batch."""
    per_objective = zscore(np.moveaxis(rewards[:, :, 0], 2, 1))  # (B, d, G)
    summed = np.einsum("bdg,d->bg", per_objective, weights)
    std = summed.std()
    if std < EPS:
        return np.zeros_like(summed)
    return (summed - summed.mean()) / (std + EPS)


@register("multi_rlvr", prompt="set")
def multi_rlvr(rewards: np.ndarray, *, weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """m answers, fixed scalar, set score = sum of the answers' scalars."""
    return zscore(scalarize(rewards, weights).sum(axis=2))


@register("random_weight_grpo")
def random_weight_grpo(rewards: np.ndarray, *, weights: np.ndarray, rng: np.random.Generator, alpha: float = 1.0) -> np.ndarray:
    """GRPO whose scalar uses a Dirichlet weight drawn afresh for each prompt group."""
    b, _, _, d = rewards.shape
    w = rng.dirichlet(np.full(d, alpha), size=b)  # (B, d)
    return goal_grpo(rewards, weights=weights, rng=rng, goals=w)


@register("goal_grpo", prompt="goal")
def goal_grpo(rewards: np.ndarray, *, weights: np.ndarray, rng: np.random.Generator, goals: np.ndarray) -> np.ndarray:
    """Goal-conditioned GRPO: group z-score of w . r, with each group's weighting w the one its
    prompt showed (`goals`, (B, d): the trainer draws Dirichlet(1) weightings and the task
    says which it can show, `task.prompt_with_weights`)."""
    goals = np.asarray(goals, dtype=np.float64)
    if goals.shape != (rewards.shape[0], rewards.shape[3]):
        raise ValueError(f"goals must have shape (B, d) = {(rewards.shape[0], rewards.shape[3])}, got {goals.shape}")
    return zscore(np.einsum("bgd,bd->bg", rewards[:, :, 0], goals))


def pkpo_matrices(n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, n) matrices M, L over sorted ranks: effective reward = M @ g, loo-1 baseline = L @ g.

    Row j (0-based sorted rank of a sample) averages, over the k-subsets containing it, the
    subset's max (M) and the max of the subset without it (L, an unbiased max@(k-1) of the
    other n - 1 samples, so it does not depend on the sample's own reward).
    """
    from scipy.special import comb  # scipy is imported where it is used: the trainer runs without it

    j = np.arange(n)[:, None]  # rank of the sample, 0-based
    top = np.arange(n)[None, :]  # rank of the subset's max
    total = comb(n - 1, k - 1)
    own = np.where(top == j, comb(j, k - 1), 0.0)
    above = np.where(top > j, comb(top - 1, k - 2), 0.0)
    below = np.where(top < j, comb(top, k - 2), 0.0)
    return (own + above) / total, (below + above) / total


@register("maxk")
def maxk(rewards: np.ndarray, *, weights: np.ndarray, rng: np.random.Generator, k: int | None = None) -> np.ndarray:
    """PKPO: unbiased max@k effective rewards minus the loo-1 baseline, then z-scored."""
    s = scalarize(rewards[:, :, 0], weights)
    n = s.shape[1]
    k = max(2, n // 2) if k is None else k
    if not 2 <= k <= n:
        raise ValueError(f"maxk needs 2 <= k <= G; got k={k}, G={n}")
    order = np.argsort(s, axis=1, kind="stable")
    ranked = np.take_along_axis(s, order, axis=1)
    own, baseline = pkpo_matrices(n, k)
    effective = ranked @ (own - baseline).T  # (B, n) in sorted order
    unsorted = np.empty_like(effective)
    np.put_along_axis(unsorted, order, effective, axis=1)
    return zscore(unsorted)


def dirichlet_weights(rng: np.random.Generator, groups: int, count: int, d: int, alpha: float, sobol: bool) -> np.ndarray:
    """(groups, count, d) weightings on the simplex: iid Dirichlet(alpha) or scrambled Sobol.

    The Sobol option draws one scrambled point set and gives each group its own random
    (Cranley-Patterson) shift; alpha = 1 maps sorted uniforms in the (d-1)-cube to simplex
    spacings, other alphas use the Gamma inverse CDF of d-dimensional points.
    """
    if not sobol:
        return rng.dirichlet(np.full(d, alpha), size=(groups, count))
    from scipy.stats import gamma, qmc

    dims = d - 1 if alpha == 1.0 else d
    if dims == 0:
        return np.ones((groups, count, d))
    engine = qmc.Sobol(dims, scramble=True, seed=rng)
    points = engine.random_base2(int(np.ceil(np.log2(max(count, 2)))))[:count]
    shifted = (points[None] + rng.random((groups, 1, dims))) % 1.0
    shifted = np.clip(shifted, 1e-12, 1 - 1e-12)
    if alpha == 1.0:
        cuts = np.sort(shifted, axis=-1)
        edges = np.concatenate([np.zeros((groups, count, 1)), cuts, np.ones((groups, count, 1))], axis=-1)
        return np.diff(edges, axis=-1)
    draws = gamma.ppf(shifted, alpha)
    return draws / draws.sum(axis=-1, keepdims=True)


def vpo_scores(rewards: np.ndarray, w: np.ndarray) -> np.ndarray:
    """R(S) = mean over weightings of the best answer in each rollout's set: (B, G)."""
    values = np.einsum("bgmd,bkd->bgkm", rewards, w)
    return values.max(axis=3).mean(axis=2)


@register("vpo", prompt="set")
def vpo(
    rewards: np.ndarray,
    *,
    weights: np.ndarray,
    rng: np.random.Generator,
    K: int = 100,
    alpha: float = 1.0,
    sobol: bool = False,
) -> np.ndarray:
    """Vector Policy Optimization: K weightings per prompt group, shared by its rollouts."""
    b, _, _, d = rewards.shape
    w = dirichlet_weights(rng, b, K, d, alpha, sobol)
    return zscore(vpo_scores(rewards, w))


def front_values(front: np.ndarray, w: np.ndarray) -> np.ndarray:
    """max over each group's front rows of w_k . r_f: (B, K); -inf for a group whose front is
    empty (a NaN row is padding, not a program)."""
    present = ~np.isnan(front).any(axis=2)  # (B, p)
    values = np.einsum("bpd,bkd->bkp", np.nan_to_num(front), w)
    return np.where(present[:, None, :], values, -np.inf).max(axis=2, initial=-np.inf)


def front_gain(rewards: np.ndarray, front: np.ndarray, w: np.ndarray) -> np.ndarray:
    """R(S) = mean_k max(max_S w_k.r, max_F w_k.r) - mean_k max_F w_k.r: (B, G). A group with an
    empty front scores plain VPO's R(S) = mean_k max_S w_k.r."""
    best = np.einsum("bgmd,bkd->bgkm", rewards, w).max(axis=3)  # (B, G, K)
    reached = front_values(front, w)[:, None, :]  # (B, 1, K)
    gain = np.where(np.isfinite(reached), np.maximum(best, reached) - reached, best)
    return gain.mean(axis=2)


@register("vpo_front", front=True)
def vpo_front(
    rewards: np.ndarray,
    *,
    weights: np.ndarray,
    rng: np.random.Generator,
    front: np.ndarray | None = None,
    K: int = 100,
    alpha: float = 1.0,
    sobol: bool = False,
) -> np.ndarray:
    """VPO against the front: a rollout's m >= 1 answers are worth their expected improvement
    over the front F of its prompt's program database, under K weightings shared by the prompt
    group; then the group z-score. `front` (B, p, d), padded with NaN rows; None or no rows:
    plain VPO (the same weightings are drawn)."""
    b, _, _, d = rewards.shape
    front = np.full((b, 0, d), np.nan) if front is None else np.asarray(front, dtype=np.float64)
    if front.ndim != 3 or front.shape[0] != b or front.shape[2] != d:
        raise ValueError(f"front must have shape (B, p, d) = ({b}, p, {d}), got {front.shape}")
    w = dirichlet_weights(rng, b, K, d, alpha, sobol)
    return zscore(front_gain(rewards, front, w))


def pad_fronts(fronts: list[np.ndarray], d: int) -> np.ndarray:
    """Stack per-prompt fronts (p_i, d) into (B, max p_i, d), padding with NaN rows."""
    p = max((len(f) for f in fronts), default=0)
    padded = np.full((len(fronts), p, d), np.nan)
    for i, front in enumerate(fronts):
        padded[i, : len(front)] = front
    return padded
