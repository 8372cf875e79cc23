"""Islands: their populations and the pure plans for migration, reset, eviction."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from evo.database.archive import Grid, GridArchive
from evo.database.matrix import MemberMatrix
from evo.database.records import Program
from evo.selection import Population

if TYPE_CHECKING:
    import networkx as nx


class Island:
    """One island's population: its live members, their normalized hashes and its archive."""

    def __init__(self, index: int, grid: Grid, d: int):
        self.index = index
        self.matrix = MemberMatrix(d)
        self.members: dict[int, Program] = {}  # id -> program, in insertion (id) order
        self.hashes: dict[str, int] = {}  # norm_hash -> id
        self.cells: dict[int, int] = {}  # id -> cell
        self.archive = GridArchive(grid)
        self.worst: list[tuple[float, int]] = []  # heap of (scalar, id); stale ids are skipped
        self.version = 0
        self._prepared: tuple[int, Population, np.ndarray] | None = None

    def add(self, program: Program, cell: int) -> None:
        self.members[program.id] = program
        self.hashes[program.norm_hash] = program.id
        self.cells[program.id] = cell
        self.archive.add(program.id, cell, program.value)
        self.matrix.add(program.id, program.vector, len(program.code))
        heapq.heappush(self.worst, (program.value, program.id))
        self.version += 1

    def remove(self, ids: Sequence[int]) -> None:
        for program_id in ids:
            program = self.members.pop(program_id)
            del self.hashes[program.norm_hash]
            del self.cells[program_id]
            self.matrix.remove(program_id)
        self.version += 1

    def clear(self) -> list[int]:
        ids = list(self.members)
        self.members.clear()
        self.hashes.clear()
        self.cells.clear()
        self.archive.clear()
        self.matrix.clear()
        self.worst.clear()
        self.version += 1
        return ids

    def population(self, weights: Sequence[float] | np.ndarray) -> tuple[Population, np.ndarray]:
        """The members' scores prepared for selection (cached until the island changes) and their ids."""
        if self._prepared is None or self._prepared[0] != self.version:
            scores, keys, ids, lengths = self.matrix.view()
            population = Population(scores, lengths=lengths, weights=np.asarray(weights), keys=keys)
            self._prepared = (self.version, population, ids)
        return self._prepared[1], self._prepared[2]

    def best(self) -> Program | None:
        elite = self.archive.best
        return None if elite is None else self.members[elite[0]]

    def top(self, k: int, originals_only: bool = True) -> list[Program]:
        """The k best members by scalar (earliest first among equals); copies are left out."""
        pool = [p for p in self.members.values() if not (originals_only and p.is_copy)]
        return sorted(pool, key=lambda p: (-p.value, p.id))[:k]


def eviction_plan(island: Island, cap: int) -> list[int]:
    """Ids to remove so the island holds at most `cap` members, worst scalar (then oldest) first.

    A cell's elite is never evicted, so an island may stay above the cap when every member left
    is an elite. The planned ids leave the island's heap: remove them from the island next.
    """
    excess = len(island.members) - cap
    if cap <= 0 or excess <= 0:
        return []
    elites = island.archive.elite_ids()
    victims: list[int] = []
    spared: list[tuple[float, int]] = []
    while len(victims) < excess and island.worst:
        scalar, program_id = heapq.heappop(island.worst)
        if program_id in elites:
            spared.append((scalar, program_id))
        elif program_id in island.members:  # else: already gone, a stale entry
            victims.append(program_id)
    for item in spared:
        heapq.heappush(island.worst, item)
    return victims


def migration_plan(islands: Sequence[Island], graph: nx.Graph, size: int) -> list[tuple[Program, int]]:
    """(program, destination) pairs: each island's top `size` originals to every neighbour lacking them."""
    plan: list[tuple[Program, int]] = []
    planned: set[tuple[str, int]] = set()
    for island in islands:
        for program in island.top(size):
            for neighbour in sorted(graph.neighbors(island.index)):
                key = (program.norm_hash, neighbour)
                if program.norm_hash not in islands[neighbour].hashes and key not in planned:
                    plan.append((program, neighbour))
                    planned.add(key)
    return plan


def reset_plan(islands: Sequence[Island], rng: np.random.Generator) -> list[tuple[int, Program]]:
    """FunSearch: the weaker half of the islands (by best scalar) restart from a survivor's best.

    Returns (island to reset, program to reseed it with); ties in best scalar are broken at random.
    """
    best = [island.best() for island in islands]
    strength = np.array([-np.inf if b is None else b.scalar for b in best])
    ranked = np.lexsort((rng.random(len(islands)), strength))  # weakest first
    weak, strong = ranked[: len(islands) // 2], ranked[len(islands) // 2 :]
    donors = [best[i] for i in strong if best[i] is not None]
    if not donors:
        return []
    return [(int(i), donors[int(rng.integers(len(donors)))]) for i in weak]
