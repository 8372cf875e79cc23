"""A training task made from any problem spec: the search's prompts, parser and sandbox.

    with SpecTask.open(spec, out, seed=0, prompts=16, from_run=None) as task:
        trainer.run(config, task=task)

Prompts come from the search's own prompt builder (evo.loop.Evolution.ask) over a program
database in `out` (a copy of a finished run's, or a fresh one seeded with the initial
program); each step's proposals are told to that Evolution and committed, so the database
grows with the training proposals exactly as a search would grow it. Completions are parsed
by the search's parser; every proposed program is evaluated by the spec's scorer in the
sandbox pool (the spec's limits and isolation), all of a step's programs at once. What a
proposal earns, and each prompt's front F (for the `vpo_front` estimator), are
training/search_signal.py's rule over what the Evolution tells this task as it commits the step
(evo.loop.Committed; the rule `evo run --train` uses): a failure earns the floor, a duplicate
by `duplicates`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evo import prompts
from evo import spec as specs
from evo.database import DB_FILE, Database
from evo.database.store import copy_store
from evo.errors import UserError, WorkFailed
from evo.loop import Committed, LoopConfig, PromptGroup, Told, auto_tokens
from evo.scores import Evaluation
from evo.policies.trained_for import SPEC_TASK
from evo.search import Search
from tasks.base import Instance, ParseError
from training import search_signal
from training.advantages import pad_fronts

POLICY_NAME = "train"  # the policy name stored with the training proposals
DB_FILES = (DB_FILE, DB_FILE + "-wal", DB_FILE + "-shm", DB_FILE + "-journal")  # the database and SQLite's side files
NEVER = 10**12  # the Evolution's budget: training, not the spec, decides when to stop


@dataclass(frozen=True)
class SpecPrompt:
    """An instance's data: one prompt of an asked group, and the front it was built against."""

    group: PromptGroup
    offset: int  # which of the group's prompts
    front: np.ndarray  # (p, d) the database's Pareto front when the group was asked

    @property
    def prompt(self) -> prompts.Prompt:
        return self.group.prompts[self.offset]


def copy_database(run: Path, out: Path, config) -> None:
    """A consistent copy of a run's program database (WAL included) into `out`, once the run's
    database has been read and accepted `config` (the spec's): a refusal copies nothing."""
    source = Path(run) / DB_FILE
    if not source.exists():
        raise UserError(f"--from-run {run}: not a run directory (no {DB_FILE}); point it at an `evo run --out` directory")
    try:
        Database.open(run, config, read_only=True).close()
    except UserError as error:
        raise UserError(f"--from-run {run}: {error}") from None
    problem = copy_store(source, Path(out) / DB_FILE)
    if problem:
        for name in DB_FILES:
            (Path(out) / name).unlink(missing_ok=True)
        raise UserError(f"--from-run {run}: cannot copy its program database ({problem}); restore it or run without "
                        "--from-run")


class SpecTask:
    """The Task contract over a problem spec (plus `stop`, `score_completions` and `front`,
    which the trainer uses when a task has them: training.rollouts.BatchScored). It observes
    its own Evolution (evo.loop.Observer): a step's proposals are what the loop commits."""

    def __init__(self, spec: specs.Spec, search: Search, *, seed: int, prompts_per_step: int,
                 duplicates: str = search_signal.DEFAULT_DUPLICATES, failures: str = search_signal.DEFAULT_FAILURES) -> None:
        self.spec, self.search = spec, search
        self.db, self.evaluator = search.db, search.evaluator
        self.duplicates, self.failures = duplicates, failures
        self.name = spec.problem.name
        self.objectives = tuple(spec.problem.objectives)
        self.weights = np.asarray(spec.problem.weights, dtype=np.float64)
        self._committed: dict[int, Committed] = {}
        # depth 0: a step's group is committed before the next one is asked (no call runs ahead)
        loop = LoopConfig.for_spec(spec, seed, iterations=NEVER, batch=prompts_per_step, depth=0, target=None)
        self.evolution = search.evolution(loop, POLICY_NAME, observers=[self])
        self._finish_pending()

    @classmethod
    def open(cls, spec: specs.Spec, out: Path, *, seed: int, prompts_per_step: int, from_run: Path | None = None,
             duplicates: str = search_signal.DEFAULT_DUPLICATES, failures: str = search_signal.DEFAULT_FAILURES) -> "SpecTask":
        """The task over the database in `out`: opened as it is (resume), copied from `from_run`,
        or created and seeded with the spec's initial program(s)."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        if from_run is not None and not (out / DB_FILE).exists():
            copy_database(Path(from_run), out, spec.database_config(seed))
        search = Search.of_spec(spec, out, seed=seed)
        try:
            return cls(spec, search, seed=seed, prompts_per_step=prompts_per_step, duplicates=duplicates, failures=failures)
        except BaseException:
            search.close()
            raise

    def close(self) -> None:
        self.search.close()

    # -- what the Evolution tells it (evo.loop.Observer) -------------------------------------

    def asking(self, group: PromptGroup) -> None:
        pass

    def told(self, told: Told) -> None:
        pass

    def committed(self, iterations: Sequence[Committed]) -> None:
        self._committed.update((c.iteration, c) for c in iterations)

    def __enter__(self) -> "SpecTask":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _finish_pending(self) -> None:
        """Evaluate and commit what a killed run (or training step) left generated but unevaluated."""
        pending = self.evolution.unevaluated()
        futures = [(c, self.evaluator.submit(c.code)) for c in pending]
        self.evolution.commit((c, f.result()) for c, f in futures)

    # -- the Task contract -------------------------------------------------------------------

    def instances(self, split: str, count: int, seed: int = 0) -> list[Instance]:
        """The next `count` prompts the search would build from the database (at most one
        step's worth). Asking twice without scoring gives the same prompts; `split` and `seed`
        do not matter: the database and the run's seed decide."""
        group = self.evolution.ask()
        if group is None:
            raise RuntimeError("the training Evolution has nothing to ask: its last step was not committed")
        if count > len(group.prompts):
            raise ValueError(f"asked for {count} prompts; a step has {len(group.prompts)}")
        front = self.evolution.front_at(group.start)
        return [Instance(self.name, split, group.start + i, SpecPrompt(group, i, front)) for i in range(count)]

    def prompt(self, instance: Instance, m: int = 1) -> str:
        return instance.data.prompt.text

    def parse(self, instance: Instance, completion: str, m: int = 1) -> list[str]:
        try:
            return [prompts.parse(instance.data.prompt, completion)]
        except prompts.ParseFailure as failure:
            raise ParseError(str(failure)) from None

    def score(self, instance: Instance, answers: Sequence[str]) -> np.ndarray:
        """The Task contract's scores (what a task family's tools read): a failed program scores
        NaN, since a spec's objectives have no known worst value. Training never reads these:
        score_completions gives each proposal search_signal's reward (a failure earns the floor)."""
        futures = [self.evaluator.submit(code) for code in answers]
        rows = [f.result() for f in futures]
        d = len(self.objectives)
        return np.array([np.asarray(e.scores, dtype=np.float64) if e.ok else np.full(d, np.nan) for e in rows]).reshape(-1, d)

    # -- what the trainer uses when a task has it (training.rollouts.BatchScored) -----------

    def token_budget(self, tokenizer, m: int = 1) -> int:
        """The default --max-new-tokens: what the search gives a policy for these prompts (the
        spec's `max_new_tokens`, else evo.loop.auto_tokens: a whole program, or a block)."""
        group = self.evolution.ask()
        if group is None:
            raise WorkFailed("the search asked for no prompt group (its iterations are spent): raise search.iterations")
        return self.evolution.config.max_new_tokens or auto_tokens(group.prompts)

    def stop(self, instances: Sequence[Instance]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for instance in instances for s in instance.data.prompt.stop))

    def front(self, instances: Sequence[Instance]) -> np.ndarray:
        """(B, p, d): each prompt's front F, NaN-padded (the `vpo_front` estimator's)."""
        return pad_fronts([instance.data.front for instance in instances], len(self.objectives))

    def score_completions(self, instances: Sequence[Instance],
                          completions: Sequence[Sequence[Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rewards (B * G, 1, d), parsed (B * G,) and what each became (B * G,: search_signal
        KINDS codes) of one step's completions (row i * G + j: completion j of prompt i). The
        step's proposals are told to the Evolution, every new program evaluated concurrently in
        the pool and committed; the rewards are what the Evolution committed."""
        group = instances[0].data.group
        if [i.data.offset for i in instances] != list(range(len(group.prompts))) or any(i.data.group is not group for i in instances):
            raise ValueError("score_completions takes the instances of one asked group, in order")
        pending = self.evolution.tell(group, completions)
        evaluations = self._evaluate({c.code for c in pending})
        self.evolution.commit((c, evaluations[c.code]) for c in pending)
        d, slots = len(self.objectives), max(len(row) for row in completions)
        outcomes = [self._outcome(i.index, slots) for i in instances]
        cut = np.array([[c.finish_reason != "stop" for c in row] for row in completions], dtype=bool)
        kinds = search_signal.cut_off(np.stack([k for k, _ in outcomes]), cut)
        fronts = pad_fronts([i.data.front for i in instances], d)
        proposals = search_signal.Proposals(kinds, np.stack([s for _, s in outcomes]), fronts)
        rewards = search_signal.rewards(proposals, self.duplicates, self.failures)
        kinds = proposals.kinds.reshape(-1)
        return rewards.reshape(-1, 1, len(self.objectives)), kinds != search_signal.UNPARSED, kinds

    def _outcome(self, iteration: int, slots: int) -> tuple[np.ndarray, np.ndarray]:
        committed = self._committed.pop(iteration)
        return search_signal.outcome(committed.candidates, committed.evaluations, slots, len(self.objectives))

    def _evaluate(self, codes: set[str]) -> dict[str, Evaluation]:
        futures: dict[str, Future] = {code: self.evaluator.submit(code) for code in sorted(codes)}
        return {code: future.result() for code, future in futures.items()}



TASK_PREFIX = SPEC_TASK  # TrainConfig.task of a spec run: "spec:" + the spec's absolute path
SOURCE_FILE = "spec_task.json"  # in the training run's directory, so --resume rebuilds the task


@dataclass(frozen=True)
class SpecSource:
    """What a spec training run trains on: the spec, its overrides and the run it started from."""

    spec: str  # absolute path of the problem spec
    overrides: dict = field(default_factory=dict)  # dotted spec keys, as `evo run --set`
    from_run: str | None = None  # the run directory whose database was copied at the start

    def load(self) -> specs.Spec:
        spec = specs.load(self.spec)
        return spec.override(self.overrides) if self.overrides else spec

    @property
    def task_name(self) -> str:
        return TASK_PREFIX + self.spec

    def save(self, out: Path) -> None:
        (Path(out) / SOURCE_FILE).write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def read(cls, out: Path) -> "SpecSource":
        """The source a spec training run in `out` was started with; a damaged file is one line."""
        path = Path(out) / SOURCE_FILE
        try:
            raw = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise UserError(f"{path}: cannot read the spec training run's source ({error}); start a new run") from None
        problem = _source_problem(raw)
        if problem:
            raise UserError(f"{path}: not a spec training run's source ({problem}); restore it or start a new run")
        return cls(**raw)

    def open(self, out: Path, *, seed: int, prompts_per_step: int, duplicates: str = search_signal.DEFAULT_DUPLICATES,
             failures: str = search_signal.DEFAULT_FAILURES) -> SpecTask:
        """The task over the database in `out` (made here by a fresh start)."""
        return SpecTask.open(self.load(), out, seed=seed, prompts_per_step=prompts_per_step,
                             from_run=None if self.from_run is None else Path(self.from_run), duplicates=duplicates,
                             failures=failures)


def _source_problem(raw: object) -> str:
    """What is wrong with a parsed spec_task.json ('' when nothing)."""
    if not isinstance(raw, dict) or set(raw) - {"spec", "overrides", "from_run"} or "spec" not in raw:
        return "expected an object with 'spec', 'overrides' and 'from_run'"
    if not isinstance(raw["spec"], str) or not raw["spec"]:
        return f"'spec' should be the spec's path, found {raw['spec']!r}"[:200]
    overrides = raw.get("overrides", {})
    if not isinstance(overrides, dict) or not all(isinstance(key, str) for key in overrides):
        return f"'overrides' should be a table of dotted spec keys, found {overrides!r}"[:200]
    if not (raw.get("from_run") is None or isinstance(raw["from_run"], str)):
        return f"'from_run' should be a run directory or null, found {raw['from_run']!r}"[:200]
    return ""
