"""The record of one program as stored: evaluated, failed, or a copy placed on another island."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

ORIGINS = ("evaluated", "migrant", "reseed", "seed")  # everything but "evaluated" is a copy


@dataclass(frozen=True, eq=False)
class Program:
    id: int
    code: str
    hash: str
    norm_hash: str
    island: int
    iteration: int
    scores: np.ndarray | None = None  # None for a failure
    scalar: float | None = None
    features: tuple[float, ...] = ()  # raw values, before clipping into the grid
    extras: dict[str, float] = field(default_factory=dict)
    parents: tuple[int, ...] = ()
    policy: str = ""
    seconds: float = 0.0
    failure_kind: str | None = None
    failure_message: str | None = None
    origin: str = "evaluated"
    source: int | None = None  # the program this one is a copy of
    removed: int | None = None  # the iteration it left its island (evicted, reset, duplicate)
    feedback: str = ""  # the scorer's feedback text; for a failure, the tail of its captured output
    stage: int = 1  # the cascade stage its evaluation reached (0: no scorer answered)

    @property
    def ok(self) -> bool:
        return self.failure_kind is None

    @property
    def is_copy(self) -> bool:
        return self.origin != "evaluated"

    @property
    def vector(self) -> np.ndarray:
        """The score vector of an evaluated program (a failure has none: ValueError)."""
        if self.scores is None:
            raise ValueError(f"program {self.id} failed ({self.failure_kind}): it has no scores")
        return self.scores

    @property
    def value(self) -> float:
        """The scalar of an evaluated program (a failure has none: ValueError)."""
        if self.scalar is None:
            raise ValueError(f"program {self.id} failed ({self.failure_kind}): it has no scalar")
        return self.scalar

    @property
    def member(self) -> bool:
        """Currently part of its island's population (and so selectable)."""
        return self.ok and self.removed is None


def original(programs: Mapping[int, Program], program_id: int) -> Program | None:
    """The evaluated program behind `program_id` (a migrant or a reseed is a copy of its
    source); None when it is not among `programs`."""
    program = programs.get(program_id)
    while program is not None and program.source is not None:
        program = programs.get(program.source)
    return program


def original_id(programs: Mapping[int, Program], program_id: int) -> int:
    """The id of the evaluated program behind `program_id`, which must be among `programs`."""
    found = original(programs, program_id)
    if found is None:
        raise KeyError(f"program {program_id} (or the program it copies) is not stored")
    return found.id


def ancestry(programs: Mapping[int, Program], program: Program | None) -> list[Program]:
    """`program` and its ancestors by their first parent (through the originals of copies),
    newest first; a cycle or a parent not among `programs` ends it."""
    chain: list[Program] = []
    seen: set[int] = set()
    current = program
    while current is not None and current.id not in seen:
        chain.append(current)
        seen.add(current.id)
        current = original(programs, current.parents[0]) if current.parents else None
    return chain
