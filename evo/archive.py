"""The loop's view of the program database (evo.database): the adapter, the initial
program, and the best program written next to the run."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from evo import spec as specs
from evo.database import Database, normalized_hash
from evo.database import Candidate as Row
from evo.database.records import Program
from evo.errors import WorkFailed
from evo.journal import Candidate
from evo.prompts import Shown
from evo.scores import Evaluation


class DatabaseArchive:
    """evo.loop.Archive over evo.database.Database."""

    def __init__(self, db: Database, policy: str = "") -> None:
        self.db, self.policy = db, policy
        self.islands = db.config.search.islands
        self.objectives = db.config.objectives

    @property
    def iterations(self) -> int:
        return self.db.iteration

    def key(self, code: str) -> str:
        return normalized_hash(code)

    def keys(self) -> set[str]:
        return set(self.db.seen)

    def shown(self, program: Program) -> Shown:
        scores = dict(zip(self.objectives, map(float, program.scores)))
        return Shown(program.code, float(program.scalar), scores, program.id)

    def sample(self, island: int, rng: np.random.Generator) -> tuple[list[Shown], list[Shown]]:
        parents, inspirations = self.db.sample(island, rng)
        if not parents:  # an island emptied by eviction or reset: start from the best
            best = self.db.best()
            parents = [best] if best is not None else []
        return [self.shown(p) for p in parents], [self.shown(p) for p in inspirations]

    def commit(self, batch: list[tuple[int, list[tuple[Candidate, Evaluation]]]]) -> None:
        """Insert iterations' programs and count the iterations, all in one transaction."""
        with self.db.store.transaction():
            for iteration, evaluated in batch:
                if self.db.iteration != iteration:
                    raise RuntimeError(f"database is at iteration {self.db.iteration}, asked to commit {iteration}")
                rows = [Row(c.code, e, c.island, tuple(int(p) for p in c.parents if p is not None), self.policy)
                        for c, e in evaluated]
                if rows:
                    self.db.add_many(rows)
                self.db.end_iteration()

    def best_scalar(self) -> float | None:
        best = self.db.best()
        return None if best is None else float(best.scalar)

    def coverage(self) -> float:
        return float(self.db.archive.coverage)

    def close(self) -> None:
        self.db.close()


def open_archive(spec: specs.Spec, path: Path, seed: int, policy: str = "") -> DatabaseArchive:
    return DatabaseArchive(Database.open(path, spec.database_config(seed)), policy)


def seed_initial(spec: specs.Spec, archive: DatabaseArchive, evaluator) -> None:
    """Evaluate and insert the initial program(s) once; the run fails if the first one fails."""
    if archive.db.programs:
        return
    for index, path in enumerate(spec.problem.programs):
        code = path.read_text(encoding="utf-8")
        evaluation = evaluator.submit(code).result()
        if index == 0 and not evaluation.ok:
            failure = evaluation.failure
            raise WorkFailed(f"the initial program {path} fails: {failure.kind}: {failure.message}; check it with evo check")
        if not archive.db.is_duplicate(code):
            archive.db.add_initial(code, evaluation)


def write_best(spec: specs.Spec, archive: DatabaseArchive, directory: Path) -> Path | None:
    best = archive.db.best()
    if best is None:
        return None
    path = Path(directory) / f"best{spec.problem.program.suffix}"
    path.write_text(best.code, encoding="utf-8")
    return path
