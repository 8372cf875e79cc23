import numpy as np

N = 26


# EVOLVE-BLOCK-START
def construct_packing():
    """Centers on a jittered grid, then the largest radii that keep the packing valid."""
    columns, margin = 5, 0.1
    k = np.arange(N)
    x = margin + (1 - 2 * margin) * (k % columns) / (columns - 1)
    y = margin + (1 - 2 * margin) * (k // columns) / (N // columns)
    centers = np.stack([x + 0.02 * np.sin(3.0 * k), y], axis=1)
    return centers, max_radii(centers)


def max_radii(centers):
    """Radii limited by the walls, then shrunk pairwise until nothing overlaps."""
    centers = np.clip(centers, 0.0, 1.0)
    radii = np.minimum.reduce([centers[:, 0], centers[:, 1], 1 - centers[:, 0], 1 - centers[:, 1]])
    for i in range(len(centers)):
        for j in range(i + 1, len(centers)):
            d = np.linalg.norm(centers[i] - centers[j])
            if radii[i] + radii[j] > d:
                scale = d / (radii[i] + radii[j])
                radii[i] *= scale
                radii[j] *= scale
    return radii
# EVOLVE-BLOCK-END


def run_packing():
    centers, radii = construct_packing()
    return np.asarray(centers, dtype=float), np.asarray(radii, dtype=float)
