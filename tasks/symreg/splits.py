"""The symreg splits: random formulas for training, a held-out stream of random formulas for
testing, and the benchmark problems (Nguyen, Feynman) as a named split.

- `train`: instance i of seed s draws from `default_rng([s, 7, i])` (the warm-up's data);
- `test`: instance i of seed s draws from `default_rng([s, TEST_STREAM, i])`, a stream no
  train instance uses, from the same grammar, and keeps only well-posed formulas (`well_posed`),
  so the true formula scores 1.0 in every region and is recovered on the dense points;
- `benchmark`: the 26 problems in order, then again with other data seeds.
"""

from __future__ import annotations

import numpy as np

from tasks.symreg.data import REGIONS, Dataset, arrays
from tasks.symreg.expressions import compile_expression, random_expression
from tasks.symreg.problems import FEYNMAN, NGUYEN, SymregProblem

SPLITS = ("train", "test", "benchmark")
BENCHMARK = NGUYEN + FEYNMAN
TRAIN_STREAM, TEST_STREAM = 7, 8
RANGES = ((-1.0, 1.0), (0.0, 2.0), (0.0, 1.0), (1.0, 5.0))
LARGEST = 1e3  # |y| above it anywhere: rejected (the prompt's numbers stay short)
SPREAD = 1e-3  # std(y) at or below it: a constant, rejected
REGION_SPREAD = 1e-2  # a region whose std(y) is at or below this share of std(y) is flat: rejected
TRIES = 1000


def train_problem(index: int, rng: np.random.Generator) -> SymregProblem:
    """A random formula checked on 64 random points (falls back to x0)."""
    arity = int(rng.integers(1, 3))
    ranges = (RANGES[rng.integers(len(RANGES))],) * arity
    for _ in range(100):
        formula = random_expression(arity, rng)
        y = compile_expression(formula, arity)(rng.uniform(*ranges[0], size=(64, arity)))
        if np.all(np.isfinite(y)) and np.std(y) > SPREAD and np.max(np.abs(y)) < LARGEST:
            return SymregProblem(f"random-{index}", formula, ranges)
    return SymregProblem(f"random-{index}", "x0", ranges)


def well_posed(data: Dataset) -> bool:
    """Whether the formula is finite and below LARGEST at every prompt, evaluation and dense
    point, varies overall, and varies in every region (no region where a constant is exact)."""
    table = arrays(data)
    values = np.concatenate([table.y_prompt, table.y_eval, table.y_dense])
    if not np.all(np.isfinite(values)) or np.max(np.abs(values)) >= LARGEST:
        return False
    spread = float(np.std(table.y_eval))
    if spread <= SPREAD:
        return False
    return all(np.std(table.y_eval[table.region == r]) > REGION_SPREAD * spread for r in range(REGIONS))


def heldout_problem(index: int, seed: int) -> tuple[SymregProblem, Dataset]:
    """Held-out instance `index` of `seed`: the first well-posed draw of its own stream."""
    rng = np.random.default_rng([seed, TEST_STREAM, index])
    for _ in range(TRIES):
        arity = int(rng.integers(1, 3))
        ranges = (RANGES[rng.integers(len(RANGES))],) * arity
        formula = random_expression(arity, rng)
        data = Dataset(formula, ranges, int(rng.integers(2**31)))
        if well_posed(data):
            return SymregProblem(f"test-{index}", formula, ranges), data
    raise RuntimeError(f"no well-posed formula in {TRIES} draws (test instance {index}, seed {seed})")


def problems(split: str, count: int, seed: int) -> list[tuple[SymregProblem, Dataset]]:
    """The (problem, data) pairs of `count` instances of a split."""
    if split == "train":
        drawn = [train_problem(i, np.random.default_rng([seed, TRAIN_STREAM, i])) for i in range(count)]
        return [(p, Dataset(p.formula, p.ranges, seed * 1000 + i)) for i, p in enumerate(drawn)]
    if split == "test":
        return [heldout_problem(i, seed) for i in range(count)]
    if split == "benchmark":  # in order; beyond the 26, again with other data seeds
        chosen = [BENCHMARK[i % len(BENCHMARK)] for i in range(count)]
        return [(p, Dataset(p.formula, p.ranges, seed * 1000 + i)) for i, p in enumerate(chosen)]
    raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
