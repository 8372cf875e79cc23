import numpy as np


# EVOLVE-BLOCK-START
def f(x):
    """A closed-form guess for the target on [0, 2]."""
    return 0.5 * x + 0.3 * x * x
# EVOLVE-BLOCK-END
