"""Black-box minimization: `minimize` gets a function, its dimension, box bounds, a call
budget and a random generator, and returns the best point it found. The scorer runs it on
several classic test functions; each one is an objective, so a search can trade them off."""

import numpy as np

# EVOLVE-BLOCK-START
def minimize(f, dim, bounds, budget, rng):
    """Return the point with the lowest f found with at most `budget` calls of f.

    A local search: each round samples `batch` points around the best one so far, at a
    distance of about `step`, and the step shrinks by the share `shrink` every round.
    f takes one point or a batch of points (one call of f for the batch, counted as
    len(batch) calls of the budget)."""
    low, high = bounds
    best_x = rng.uniform(low, high, dim)
    best_y = f(best_x)
    step = 0.5 * (high - low)
    batch = 20
    shrink = 0.01
    for _ in range((budget - 1) // batch):
        xs = np.clip(best_x + step * rng.normal(size=(batch, dim)), low, high)
        ys = f(xs)
        i = np.argmin(ys)
        if ys[i] < best_y:
            best_x, best_y = xs[i], ys[i]
        step = step * (1 - shrink)
    return best_x
# EVOLVE-BLOCK-END
