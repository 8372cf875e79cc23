"""Each example scorer gives its lowest score to a degenerate candidate (None, NaN, wrong
shape, empty), through the real sandbox."""

from pathlib import Path

import pytest

from evo import spec
from evo.sandbox import Sandbox

ROOT = Path(__file__).resolve().parents[1]
DEGENERATE = {
    "function_minimization": [
        "def minimize(f, dim, bounds, budget, rng):\n    return None\n",
        "def minimize(f, dim, bounds, budget, rng):\n    return [float('nan')] * dim\n",
        "def minimize(f, dim, bounds, budget, rng):\n    return [0.0]\n",
        "def minimize(f, dim, bounds, budget, rng):\n    return []\n",
    ],
    "circle_packing": [
        "def run_packing():\n    return None, None\n",
        "def run_packing():\n    return [[float('nan')] * 2] * 26, [0.1] * 26\n",
        "def run_packing():\n    return [[0.5, 0.5]], [0.5]\n",
        "def run_packing():\n    return [], []\n",
    ],
    "nguyen7": [
        "def f(x):\n    return None\n",
        "def f(x):\n    return x * float('nan')\n",
        "def f(x):\n    return [1.0, 2.0]\n",
        "def f(x):\n    return []\n",
    ],
}


@pytest.mark.parametrize("example", sorted(DEGENERATE))
def test_degenerate_candidates_score_lowest(example):
    problem = spec.load(ROOT / "examples" / example / "problem.toml").override({"sandbox.workers": 1})
    with Sandbox.from_spec(problem) as box:
        for code in DEGENERATE[example]:
            evaluation = box.evaluate(code)
            assert not evaluation.ok or max(evaluation.scores) == 0.0, (code, evaluation.scores)
        good = box.evaluate(problem.problem.program.read_text())
    assert good.ok and max(good.scores) > 0.0, good.failure


SEARCH = "import numpy as np\ndef minimize(f, dim, bounds, budget, rng):\n    xs = rng.uniform(*bounds, ({n}, dim))\n" \
         "    ys = {calls}\n    return xs[int(np.argmin(ys))]\n"


def test_function_minimization_takes_a_batch_as_its_points():
    """The example's objective takes one point or a batch: the same points score the same
    either way, a batch counts its points against the budget, an empty batch is refused."""
    problem = spec.load(ROOT / "examples" / "function_minimization" / "problem.toml").override({"sandbox.workers": 1})
    with Sandbox.from_spec(problem) as box:
        one, batch, over, empty = (box.evaluate(SEARCH.format(n=n, calls=calls)) for n, calls in (
            ("budget // 10", "[f(x) for x in xs]"), ("budget // 10", "f(xs)"), ("budget + 1", "f(xs)"), ("0", "f(xs)")))
    assert one.ok and batch.ok and list(one.scores) == list(batch.scores) and min(one.scores) > 0.0
    assert one.extras["budget_used"] == batch.extras["budget_used"] == pytest.approx(0.1)
    assert not over.ok and "BudgetExceeded: more than 500 calls" in over.failure.message
    assert not empty.ok and "expected finite points" in empty.failure.message
