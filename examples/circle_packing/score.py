"""Circle packing scorer (n = 26 in the unit square).

sum_radii: the sum of radii / 2.635 (the best known); smallest: the smallest radius / 0.1
(capped at 1); extra key `spread`: the standard deviation of the radii / 0.1 (capped at 1).
An invalid packing (overlap, outside the square, wrong shape) scores zero.
"""

import numpy as np

from evo.sandbox import candidate

N, BEST_KNOWN, TOLERANCE = 26, 2.635, 1e-9


def _valid(centers, radii):
    if centers.shape != (N, 2) or radii.shape != (N,) or not np.all(np.isfinite(centers)) or not np.all(np.isfinite(radii)):
        return False
    if np.any(radii < 0) or np.any(centers - radii[:, None] < -TOLERANCE) or np.any(centers + radii[:, None] > 1 + TOLERANCE):
        return False
    gaps = np.linalg.norm(centers[:, None] - centers[None], axis=-1) - (radii[:, None] + radii[None])
    return bool(np.all(gaps[np.triu_indices(N, 1)] >= -TOLERANCE))


def _load(path):
    return candidate.load(path)  # the candidate's own process; calls return arrays and lists


def evaluate(path):
    centers, radii = _load(path).run_packing()
    centers, radii = np.asarray(centers, dtype=float), np.asarray(radii, dtype=float)
    if not _valid(centers, radii):
        return {"sum_radii": 0.0, "smallest": 0.0, "spread": 0.0}
    return {
        "sum_radii": float(radii.sum() / BEST_KNOWN),
        "smallest": float(min(radii.min() / 0.1, 1.0)),
        "spread": float(min(radii.std() / 0.1, 1.0)),
    }
