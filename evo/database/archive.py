"""MAP-Elites: a grid with FIXED ranges and bins, and one elite per cell by the scalar."""

from __future__ import annotations

import math
from collections.abc import Sequence

from evo.database.config import FeatureConfig


class Grid:
    """Maps feature values to a cell: each value is clipped into its fixed range, never re-binned."""

    def __init__(self, features: Sequence[FeatureConfig]):
        self.dims = tuple((f.range[0], f.range[1], int(f.bins)) for f in features)
        self.cells = math.prod(bins for _, _, bins in self.dims)

    def cell(self, values: Sequence[float]) -> int:
        """The flat (row-major) index of the cell holding `values` (0 when there are no features)."""
        index = 0
        for value, (low, high, bins) in zip(values, self.dims):
            clipped = min(max(float(value), low), high)
            index = index * bins + min(int((clipped - low) / (high - low) * bins), bins - 1)
        return index


class GridArchive:
    """One elite per cell: the first program with the highest scalar that reached the cell."""

    def __init__(self, grid: Grid):
        self.grid = grid
        self.elites: dict[int, tuple[int, float]] = {}  # cell -> (program id, scalar)

    def add(self, program_id: int, cell: int, scalar: float) -> bool:
        """Offer a program; True when it became its cell's elite."""
        current = self.elites.get(cell)
        if current is not None and scalar <= current[1]:
            return False
        self.elites[cell] = (program_id, scalar)
        return True

    def elite_ids(self) -> set[int]:
        return {program_id for program_id, _ in self.elites.values()}

    def clear(self) -> None:
        self.elites.clear()

    @property
    def coverage(self) -> float:
        return len(self.elites) / self.grid.cells

    @property
    def qd_score(self) -> float:
        """The sum of the elites' scalars."""
        return float(sum(scalar for _, scalar in self.elites.values()))

    @property
    def best(self) -> tuple[int, float] | None:
        """(program id, scalar) of the best elite; ties go to the earliest program."""
        if not self.elites:
            return None
        return max(self.elites.values(), key=lambda elite: (elite[1], -elite[0]))
