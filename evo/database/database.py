"""The facade the search loop calls: a run's programs, islands and archives over a durable store.

Every change is written to SQLite first and committed before the call returns; the in-memory
indexes (islands, archives, duplicate hashes) are then exactly what replaying the store gives,
so `Database.open` on a killed run's directory rebuilds the same state.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from evo.database.archive import Grid, GridArchive
from evo.database.config import DatabaseConfig
from evo.database.hashing import dedupe_hash, exact_hash
from evo.database.journal import Candidate, CandidateJournal
from evo.database.islands import Island, eviction_plan, migration_plan, reset_plan
from evo.database.topology import topology
from evo.database.records import Program, original_id
from evo.database.store import Store
from evo.errors import UserError
from evo.features import MissingFeature, feature_values
from evo.metrics import on_front
from evo.scores import Evaluation, scalarize, storable
from evo.selection import select

if TYPE_CHECKING:
    import networkx as nx

DB_FILE = "programs.sqlite"
OUTPUT_TAIL_CHARS = 2000  # of a failed evaluation's captured output, kept with its record


@dataclass(frozen=True)
class EvaluatedCandidate:
    """One evaluated candidate for `Database.add_many`."""

    code: str
    evaluation: Evaluation
    island: int
    parents: tuple[int, ...] = ()
    policy: str = ""


def failure_feedback(evaluation: Evaluation) -> str:
    """What a failed evaluation's record keeps for the prompts and `evo show --failures`: the
    tail of its captured output, then what the scorer added to the failure (its artifacts)."""
    output = storable(evaluation.output[-OUTPUT_TAIL_CHARS:])
    if not evaluation.feedback:
        return output
    return f"{output.rstrip()}\n{evaluation.feedback}" if output.strip() else evaluation.feedback


def database_file(path: Path | str) -> Path:
    """A run directory holds `programs.sqlite`; a path ending in .sqlite/.db is the file itself."""
    path = Path(path)
    return path if path.suffix in (".sqlite", ".db") else path / DB_FILE


class Database:
    def __init__(self, store: Store, config: DatabaseConfig):
        self.store = store
        self.config = config
        self.weights = np.asarray(config.weight_vector, dtype=np.float64)
        self.grid = Grid(config.features)
        self.graph = topology(config.search.topology, config.search.islands, config.seed)
        self.journal = CandidateJournal(store)
        self._lock = threading.RLock()
        self._load()
        store.after_rollback = self._load  # a failed write leaves memory as the store is

    @classmethod
    def open(cls, path: Path | str, config: DatabaseConfig | None = None, *, adopt: Path | None = None,
             read_only: bool = False) -> "Database":
        """Open (or create) a run's database; without `config`, the stored one is used (resume).
        `adopt`: an old separate journal file to move in (CandidateJournal.adopt). Nothing is
        written until the stored run accepted `config` and every row was read. `read_only`:
        nothing is ever written (a run on read-only media, or another user's)."""
        file = database_file(path)
        if (config is None or read_only) and not file.exists():
            raise UserError(f"{path}: no run found here (no {file.name}); start one with `evo run SPEC`")
        store = Store(file, read_only=read_only)
        try:
            stored = store.get_meta("config")
            config = cls._settled(path, stored, config)
            db = cls(store, config)
            if adopt is not None:
                db.journal.adopt(adopt, committed=db.iteration)
        except UserError:
            store.close()
            raise
        except (sqlite3.DatabaseError, ValueError, KeyError, TypeError) as error:
            store.close()
            raise UserError(f"{file}: not a usable program database ({type(error).__name__}: {error}); "
                            "restore it from a copy or start a new run") from None
        if stored != config.to_json() and not read_only:
            store.set_meta("config", config.to_json())
        return db

    @staticmethod
    def _settled(path: Path | str, stored: str | None, config: DatabaseConfig | None) -> DatabaseConfig:
        """The config to open with: the stored one (resume) or `config` when it fits the stored run."""
        if config is None:
            if stored is None:
                raise UserError(f"{path}: no run found here (the database has no config); start one with `evo run SPEC`")
            return DatabaseConfig.from_json(stored)
        if stored is not None:
            old = DatabaseConfig.from_json(stored)
            if (old.objectives, old.search.islands, old.features, old.minimize) != (
                    config.objectives, config.search.islands, config.features, config.minimize):
                raise UserError(f"{path}: this run was started with other objectives, islands, features or minimize; "
                                "resume it with its own spec")
            config = dataclasses.replace(config, dedupe=old.dedupe)  # the stored hashes are of its key
        return config

    def _load(self) -> None:
        """(Re)build every in-memory index by replaying the store in id order."""
        self.islands = [Island(i, self.grid, len(self.config.objectives)) for i in range(self.config.search.islands)]
        self.programs: dict[int, Program] = {}
        self.seen: set[str] = set()
        self._failed_children: dict[int, list[int]] = {}  # original parent id -> its failed children's ids
        self.archive = GridArchive(self.grid)
        self.iteration = int(self.store.get_meta("iteration") or 0)
        for program in self.store.programs():
            self._index(program)

    def _index(self, program: Program) -> None:
        self.programs[program.id] = program
        cell = self.grid.cell(program.features) if program.ok else -1
        if not program.is_copy:
            self.seen.add(program.norm_hash)
            if not program.ok:
                for parent in dict.fromkeys(original_id(self.programs, q) for q in program.parents if q in self.programs):
                    self._failed_children.setdefault(parent, []).append(program.id)
            if program.ok:
                self.archive.add(program.id, cell, program.value)
        if program.member:
            self.islands[program.island].add(program, cell)

    # -- writing -----------------------------------------------------------------------------

    def add(self, code: str, evaluation: Evaluation, *, island: int, parents: Sequence[int] = (), policy: str = "") -> Program:
        """Store one evaluated candidate (a failure too); returns after the commit."""
        return self.add_many([EvaluatedCandidate(code, evaluation, island, tuple(parents), policy)])[0]

    def add_many(self, candidates: Iterable[EvaluatedCandidate]) -> list[Program]:
        """Store several candidates in ONE transaction; returns after its commit."""
        with self._lock:
            records = [self._record(c) for c in candidates]
            return self._write(lambda: self._insert(records))

    def add_initial(self, code: str, evaluation: Evaluation, *, policy: str = "initial") -> Program:
        """The initial program: evaluated once, on island 0, and copied to every other island."""
        with self._lock:
            record = self._record(EvaluatedCandidate(code, evaluation, 0, (), policy))

            def write() -> Program:
                (first,) = self._insert([record])
                if first.member:
                    self._insert([self._copy(first, i, "seed") for i in range(1, len(self.islands))])
                return self.programs[first.id]

            return self._write(write)

    def end_iteration(self) -> dict[str, Any]:
        """Count one iteration; migrate and reset islands when the schedule says so."""
        with self._lock:

            def write() -> dict[str, Any]:
                self.iteration += 1
                self.store.set_meta("iteration", str(self.iteration))
                done: dict[str, Any] = {"iteration": self.iteration, "migrated": 0, "reset": []}
                search = self.config.search
                if search.migration_interval and self.iteration % search.migration_interval == 0:
                    done["migrated"] = self._migrate()
                if search.reset_interval and self.iteration % search.reset_interval == 0:
                    done["reset"] = self._reset()
                return done

            return self._write(write)

    def commit_iterations(self, batch: Sequence[tuple[int, Sequence[tuple[Candidate, Evaluation]]]],
                          policy: str = "") -> None:
        """Insert iterations' evaluated candidates, mark them inserted in the journal and count
        each iteration, all in ONE transaction (the journal is in the same file, so nothing
        needs reconciling after a kill). `policy`: the name stored for a candidate that does
        not carry its own."""
        with self._lock, self.store.transaction():
            for iteration, evaluated in batch:
                if self.iteration != iteration:
                    raise RuntimeError(f"database is at iteration {self.iteration}, asked to commit {iteration}")
                rows = [EvaluatedCandidate(c.code, e, c.island, tuple(int(p) for p in c.parents if p is not None),
                                           c.policy or policy)
                        for c, e in evaluated]
                if rows:
                    self.add_many(rows)
                self.journal.mark_inserted(iteration)
                self.end_iteration()

    def _write(self, work: Any) -> Any:
        """Run `work` in one transaction (memory follows as it goes; a rollback rebuilds it)."""
        with self.store.transaction():
            return work()

    def _record(self, candidate: EvaluatedCandidate) -> Program:
        if not 0 <= candidate.island < len(self.islands):
            raise ValueError(f"island {candidate.island} out of range 0..{len(self.islands) - 1}")
        code, evaluation = candidate.code, candidate.evaluation
        base: dict[str, Any] = dict(
            id=0, code=code, hash=exact_hash(code), norm_hash=self.dedupe_key(code), island=candidate.island,
            iteration=self.iteration, parents=tuple(int(p) for p in candidate.parents), policy=candidate.policy,
            seconds=float(evaluation.seconds), stage=int(evaluation.stage),
        )
        if evaluation.failure is not None:
            return Program(**base, failure_kind=evaluation.failure.kind, failure_message=evaluation.failure.message,
                           feedback=failure_feedback(evaluation))
        scores = np.asarray(evaluation.scores, dtype=np.float64)
        if scores.shape != (len(self.config.objectives),):
            raise ValueError(f"scores have shape {scores.shape}, expected ({len(self.config.objectives)},)")
        if not np.isfinite(scores).all():
            return Program(**base, failure_kind="bad_output", failure_message=f"non-finite scores {scores.tolist()}")
        try:
            values = feature_values(self.config.features, code, scores, evaluation.extras, self.config.objectives)
        except MissingFeature as error:
            return Program(**base, failure_kind="bad_output", failure_message=str(error))
        scalar = float(scalarize(scores, self.weights))
        features = tuple(float(v) for v in values)
        return Program(**base, scores=scores, scalar=scalar, features=features, extras=dict(evaluation.extras),
                       feedback=evaluation.feedback)

    def _copy(self, source: Program, island: int, origin: str) -> Program:
        return dataclasses.replace(
            source, id=0, island=island, iteration=self.iteration, parents=(), seconds=0.0, origin=origin, source=source.id, removed=None
        )

    def _insert(self, records: Sequence[Program]) -> list[Program]:
        """Insert records in order; a code already on its island is stored as removed at once."""
        stored = []
        for record in records:
            if record.ok and record.norm_hash in self.islands[record.island].hashes:
                record = dataclasses.replace(record, removed=self.iteration)
            (new_id,) = self.store.insert([record])
            program = dataclasses.replace(record, id=new_id)
            self._index(program)
            if program.member:
                self._evict(self.islands[program.island])
            stored.append(self.programs[new_id])
        return stored

    def _remove(self, island: Island, ids: list[int]) -> None:
        if not ids:
            return
        self.store.mark_removed(ids, self.iteration)
        island.remove(ids)
        for program_id in ids:
            self.programs[program_id] = dataclasses.replace(self.programs[program_id], removed=self.iteration)

    def _evict(self, island: Island) -> None:
        self._remove(island, eviction_plan(island, self.config.search.population_cap))

    def _migrate(self) -> int:
        plan = migration_plan(self.islands, self.graph, self.config.search.migration_size)
        copies = self._insert([self._copy(program, destination, "migrant") for program, destination in plan])
        moves = [[c.source, c.island, c.id] for c in copies]
        self.store.event(self.iteration, "migration", {"moves": moves})
        return len(copies)

    def _reset(self) -> list[int]:
        plan = reset_plan(self.islands, np.random.default_rng([self.config.seed, self.iteration]))
        for index, donor in plan:
            island = self.islands[index]
            removed = list(island.members)
            self._remove(island, removed)
            island.clear()
            (reseed,) = self._insert([self._copy(donor, index, "reseed")])
            self.store.event(self.iteration, "reset", {"island": index, "removed": len(removed), "reseed": reseed.id, "donor": donor.id})
        return [index for index, _ in plan]

    # -- reading -----------------------------------------------------------------------------

    def is_duplicate(self, code: str, island: int | None = None) -> bool:
        """True when this code (up to its duplicate key) was evaluated in this run or is on `island`."""
        key = self.dedupe_key(code)
        with self._lock:
            return key in self.seen or (island is not None and key in self.islands[island].hashes)

    def dedupe_key(self, code: str) -> str:
        """The hash two programs share when they count as duplicates (the config's `dedupe`)."""
        return dedupe_hash(code, self.config.dedupe)

    def sample(self, island: int, rng: np.random.Generator) -> tuple[list[Program], list[Program]]:
        """(parents, inspirations) from one island's members by the configured selection.

        One selection call draws parents + inspirations; repeats are dropped, so fewer may come
        back. An empty island gives ([], []).
        """
        with self._lock:
            members = self.islands[island]
            if not members.members:
                return [], []
            population, ids = members.population(self.weights)
            search = self.config.search
            k = search.parents + search.inspirations
            chosen = ids[select(search.selection, population, k, rng, **search.selection_options)]
            parents = list(dict.fromkeys(chosen[: search.parents].tolist()))
            inspirations = [i for i in dict.fromkeys(chosen[search.parents :].tolist()) if i not in parents]
            return [self.programs[i] for i in parents], [self.programs[i] for i in inspirations]

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        """Run metadata for the loop (e.g. the spec text); "config" and "iteration" are the database's."""
        return self.store.get_meta(key, default)

    def set_meta(self, key: str, value: str) -> None:
        if key in ("config", "iteration"):
            raise ValueError(f"meta key {key!r} belongs to the database")
        with self._lock:
            self.store.set_meta(key, value)

    def event(self, kind: str, data: dict[str, Any]) -> None:
        """Log an event (committed) at the current iteration."""
        with self._lock:
            self.store.event(self.iteration, kind, data)

    def get(self, program_id: int) -> Program:
        return self.programs[program_id]

    def failed_children(self, program: Program, limit: int) -> list[Program]:
        """The last `limit` failed children of `program` (or of what it is a copy of), newest first."""
        with self._lock:
            ids = self._failed_children.get(original_id(self.programs, program.id), []) if program.id in self.programs else []
            return [self.programs[i] for i in reversed(ids[-limit:])] if limit > 0 else []

    def evaluated(self, ok_only: bool = True) -> list[Program]:
        """Every evaluated program (not copies), in order; only successes unless ok_only=False."""
        return [p for p in self.programs.values() if not p.is_copy and (p.ok or not ok_only)]

    def best(self) -> Program | None:
        """The evaluated program with the highest scalar (the earliest among equals)."""
        elite = self.archive.best
        return None if elite is None else self.programs[elite[0]]

    def front(self) -> list[Program]:
        """The evaluated programs on the front (evo.metrics.front of their score vectors): every
        program whose vector is a front row, in id order."""
        with self._lock:
            programs = self.evaluated()
        if not programs:
            return []
        mask = on_front(np.stack([p.vector for p in programs]))
        return sorted((p for p, on in zip(programs, mask) if on), key=lambda p: p.id)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return self._stats()

    def _stats(self) -> dict[str, Any]:
        evaluated = [p for p in self.programs.values() if not p.is_copy]
        best = self.best()
        return {
            "programs": len(evaluated),
            "failures": sum(not p.ok for p in evaluated),
            "copies": len(self.programs) - len(evaluated),
            "iterations": self.iteration,
            "best": None if best is None else best.scalar,
            "coverage": self.archive.coverage,
            "qd_score": self.archive.qd_score,
            "islands": [
                {
                    "members": len(i.members),
                    "best": None if (top := i.best()) is None else top.scalar,
                    "coverage": i.archive.coverage,
                    "qd_score": i.archive.qd_score,
                }
                for i in self.islands
            ],
        }

    def genealogy(self) -> nx.DiGraph:
        """Programs as nodes; parent -> child edges (relation "parent") and source -> copy ("copy")."""
        import networkx as nx

        graph = nx.DiGraph()
        for p in self.programs.values():
            graph.add_node(p.id, island=p.island, iteration=p.iteration, scalar=p.scalar, origin=p.origin, failure=p.failure_kind)
        for p in self.programs.values():
            graph.add_edges_from(((q, p.id) for q in p.parents if q in self.programs), relation="parent")
            if p.source is not None:
                graph.add_edge(p.source, p.id, relation="copy")
        return graph

    def state(self) -> dict[str, Any]:
        """Everything in memory, in plain values (a reopened database must give the same)."""
        return {
            "iteration": self.iteration,
            "programs": {i: dataclasses.astuple(dataclasses.replace(p, scores=None)) + (None if p.scores is None else p.scores.tobytes(),) for i, p in self.programs.items()},
            "seen": sorted(self.seen),
            "archive": dict(self.archive.elites),
            "islands": [(list(i.members), dict(i.hashes), dict(i.archive.elites), dict(i.cells)) for i in self.islands],
        }

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "Database":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
