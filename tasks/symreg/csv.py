"""A user's own regression data as a symreg problem spec:

    python -m tasks.symreg.csv data.csv --out DIR [--name NAME] [--seed S]
    evo run DIR/problem.toml --policy mutate:          # or local:CHECKPOINT, openai:URL#MODEL

or in Python `spec_from_csv("data.csv", "DIR")`. The CSV has a header naming its columns
x0, x1, ... and y (any order), one row per point, every value a finite number. Every row is
scored: the box of the points is cut into 8 regions at the quantiles of x0 (one variable),
x0 x x1 (4 x 2) or the halves of x0, x1, x2, and each region's accuracy is
1 / (1 + RMSE_region / std(y)) (a region without points scores the accuracy on all points);
`exact` is 1.0 when the expression matches every y within 1e-6 relative. The prompt shows
20 rows drawn with the seed, as the task's prompts do.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

from tasks.symreg.data import REGIONS, Arrays, splits_per_variable
from tasks.symreg.spec import write_points_spec

PROMPT_POINTS = 20
FEWEST = 2 * REGIONS


class DataError(ValueError):
    """The CSV cannot be read as points x0..xk -> y (the message says what to fix)."""


def read_points(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(X (n, k), y (n,)) from a CSV with a header naming x0..x{k-1} and y."""
    with open(path, newline="") as handle:
        rows = [row for row in csv.reader(handle) if row and any(cell.strip() for cell in row)]
    if not rows:
        raise DataError(f"{path}: empty; it needs a header row x0,...,y and one row per point")
    header = [name.strip() for name in rows[0]]
    arity = len(header) - 1
    expected = {f"x{i}" for i in range(arity)} | {"y"}
    if set(header) != expected or arity < 1:
        raise DataError(f"{path}: the header must name the columns x0..x{max(arity - 1, 0)} and y, got {','.join(header)}")
    try:
        values = np.array([[float(cell) for cell in row] for row in rows[1:]], dtype=np.float64)
    except ValueError as error:
        raise DataError(f"{path}: every value must be a number ({error})") from None
    if values.ndim != 2 or values.shape[1] != len(header) or not np.all(np.isfinite(values)):
        raise DataError(f"{path}: every row needs {len(header)} finite numbers")
    if len(values) < FEWEST:
        raise DataError(f"{path}: {len(values)} rows; at least {FEWEST} are needed (2 per region)")
    order = [header.index(f"x{i}") for i in range(arity)]
    return values[:, order], values[:, header.index("y")]


def regions_of(X: np.ndarray) -> np.ndarray:
    """Each point's region: cuts at the quantiles of the first variables (data.splits_per_variable)."""
    cuts = splits_per_variable(X.shape[1])
    bins = []
    for column, n in zip(X.T, cuts):
        inner = np.quantile(column, np.linspace(0, 1, n + 1)[1:-1])
        bins.append(np.searchsorted(inner, column, side="right"))
    return np.ravel_multi_index(tuple(bins), cuts).astype(np.int64)


def points_table(X: np.ndarray, y: np.ndarray, seed: int = 0) -> Arrays:
    """The points as the task's arrays: all of them scored and used for `exact`, 20 in the prompt."""
    chosen = np.random.default_rng(seed).choice(len(X), size=min(PROMPT_POINTS, len(X)), replace=False)
    return Arrays(X[chosen], y[chosen], X, y, regions_of(X), X, y)


def spec_from_csv(path: str | Path, directory: str | Path, name: str = "", seed: int = 0) -> Path:
    """Write a symreg spec for the CSV's points into `directory`; return the spec's path."""
    X, y = read_points(path)
    return write_points_spec(name or Path(path).stem, points_table(X, y, seed), Path(directory))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tasks.symreg.csv", description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", help="a CSV with a header x0,...,xk,y")
    parser.add_argument("--out", required=True, help="the spec's directory (problem.toml, expression.txt, score.py, points.npz)")
    parser.add_argument("--name", default="", help="the problem's name (default: the CSV's file name)")
    parser.add_argument("--seed", type=int, default=0, help="which rows the prompt shows")
    args = parser.parse_args(argv)
    try:
        spec = spec_from_csv(args.csv, args.out, args.name, args.seed)
    except (DataError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
