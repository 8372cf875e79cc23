"""Black-box minimization: `minimize` gets a function, its dimension, box bounds, a call
budget and a random generator, and returns the best point it found. The scorer runs it on
several classic test functions; each one is an objective, so a search can trade them off."""

import numpy as np

# EVOLVE-BLOCK-START
def minimize(f, dim, bounds, budget, rng):
    """Return the point with the lowest f found with at most `budget` calls of f."""
    low, high = bounds
    best_x = rng.uniform(low, high, dim)
    best_y = f(best_x)
    for _ in range(budget - 1):
        x = rng.uniform(low, high, dim)
        y = f(x)
        if y < best_y:
            best_x, best_y = x, y
    return best_x
# EVOLVE-BLOCK-END
