"""Open a search: the one place a program database, an evaluator and the initial programs meet.

    with Search.of_spec(spec, directory, seed=0) as search:           # evo run, evo train --spec
        evolution = search.evolution(LoopConfig.for_spec(spec, 0), "mutate:")
        run(evolution, policy, search.evaluator)

`evo run` (evo/run_dir.py), `evo.api.evolve` and spec training (training/spec_task.py) open
their searches here: the database in the directory (made, or opened as a killed run left it),
the evaluator started, and on a fresh database the initial program(s) evaluated and stored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo import spec as specs
from evo.database import Database, DatabaseConfig
from evo.errors import WorkFailed
from evo.loop import Evolution, LoopConfig, Observer
from evo.policy_mix import PolicyMix


@dataclass(frozen=True)
class Initial:
    """An initial program: its code and where it came from (a file, or '' for code given directly)."""

    code: str
    source: str = ""


def make_evaluator(spec: specs.Spec, executor: str = "process"):
    """The spec's evaluator: the sandbox's process pool, or Ray actors."""
    if executor == "ray":
        from evo.ray_executor import RayEvaluator

        return RayEvaluator(spec)
    from evo.sandbox.pool import Sandbox

    return Sandbox.from_spec(spec)


def seed_initial(db: Database, evaluator, programs: Sequence[Initial], hint: str = "") -> None:
    """Evaluate and store the initial programs once (a database that holds programs is left as
    it is); the search fails when the first one fails (`hint`: what to do, after the message)."""
    if db.programs:
        return
    for index, program in enumerate(programs):
        evaluation = evaluator.submit(program.code).result()
        if index == 0 and not evaluation.ok:
            failure, named = evaluation.failure, f" {program.source}" if program.source else ""
            raise WorkFailed(f"the initial program{named} fails: {failure.kind}: {failure.message}{hint}")
        if not db.is_duplicate(program.code):
            db.add_initial(program.code, evaluation)


@dataclass
class Search:
    """An open search: its database and evaluator, closed together."""

    db: Database
    evaluator: Any

    @classmethod
    def open(cls, directory: Path, config: DatabaseConfig, start: Callable[[], Any], programs: Sequence[Initial], *,
             adopt: Path | None = None, hint: str = "") -> "Search":
        """The database in `directory` opened under `config`, the evaluator `start()` gives, the
        initial `programs` evaluated and stored on a fresh database; nothing is left open on failure."""
        db = Database.open(directory, config, adopt=adopt)
        evaluator = None
        try:
            evaluator = start()
            seed_initial(db, evaluator, programs, hint)
        except BaseException:
            if evaluator is not None:
                evaluator.close()
            db.close()
            raise
        return cls(db, evaluator)

    @classmethod
    def of_spec(cls, spec: specs.Spec, directory: Path, *, seed: int, executor: str = "process",
                adopt: Path | None = None) -> "Search":
        """The search of a problem spec in `directory` (its initial program files, its sandbox)."""
        programs = [Initial(path.read_text(encoding="utf-8"), str(path)) for path in spec.problem.programs]
        return cls.open(Path(directory), spec.database_config(seed), lambda: make_evaluator(spec, executor), programs,
                        adopt=adopt, hint="; check it with evo check")

    def evolution(self, loop: LoopConfig, policy: str | PolicyMix = "", observers: Sequence[Observer] = ()) -> Evolution:
        return Evolution(loop, self.db, policy, observers)

    def close(self) -> None:
        try:
            self.evaluator.close()
        finally:
            self.db.close()

    def __enter__(self) -> "Search":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Initial", "Search", "make_evaluator", "seed_initial"]
