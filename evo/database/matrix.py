"""An island's members as arrays that grow in place: scores, signature keys, ids, code lengths.

Selection needs the members' score matrix after every change to an island; keeping it here,
row by row as programs come and go, makes preparing it a gather instead of a rebuild.
"""

from __future__ import annotations

import numpy as np

from evo.selection.population import signature_keys


class MemberMatrix:
    def __init__(self, d: int, capacity: int = 64):
        self.d = d
        self.scores = np.empty((capacity, d))
        self.keys = np.empty(capacity, dtype=np.uint64)
        self.ids = np.empty(capacity, dtype=np.int64)
        self.lengths = np.empty(capacity)
        self.alive = np.zeros(capacity, dtype=bool)
        self.used = 0  # rows written so far (alive or not), in insertion order
        self.hashed = 0  # rows below this have their signature key
        self.slots: dict[int, int] = {}  # program id -> row

    def add(self, program_id: int, scores: np.ndarray, length: int) -> None:
        if self.used == len(self.ids):
            self._resize(2 * len(self.ids))
        row = self.used
        self.scores[row] = scores
        self.ids[row], self.lengths[row], self.alive[row] = program_id, length, True
        self.slots[program_id] = row
        self.used += 1

    def remove(self, program_id: int) -> None:
        self.alive[self.slots.pop(program_id)] = False
        if self.used > 64 and 2 * len(self.slots) < self.used:
            self._compact()

    def clear(self) -> None:
        self.alive[: self.used] = False
        self.used = self.hashed = 0
        self.slots.clear()

    def view(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(scores, keys, ids, lengths) of the live members, in insertion order."""
        if self.hashed < self.used:  # the keys of new rows, in one call
            self.keys[self.hashed : self.used] = signature_keys(self.scores[self.hashed : self.used])
            self.hashed = self.used
        rows = np.flatnonzero(self.alive[: self.used])
        return self.scores[rows], self.keys[rows], self.ids[rows], self.lengths[rows]

    def _compact(self) -> None:
        self.view()  # hash every row first, so the kept keys are all valid
        rows = np.flatnonzero(self.alive[: self.used])
        for array in (self.scores, self.keys, self.ids, self.lengths):
            array[: len(rows)] = array[rows]
        self.alive[: self.used] = False
        self.alive[: len(rows)] = True
        self.used = self.hashed = len(rows)
        self.slots = {int(program_id): row for row, program_id in enumerate(self.ids[: self.used])}

    def _resize(self, capacity: int) -> None:
        for name in ("scores", "keys", "ids", "lengths", "alive"):
            old = getattr(self, name)
            new = np.zeros((capacity, *old.shape[1:]), dtype=old.dtype)
            new[: self.used] = old[: self.used]
            setattr(self, name, new)
