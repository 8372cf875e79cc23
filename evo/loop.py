"""The evolution loop: sample parents -> prompt -> policy -> parse -> dedupe -> evaluate ->
insert, with policy calls and evaluations overlapping.

Iterations are numbered from 0; one iteration is one prompt with `samples` completions.
Prompts are built in groups of `batch` iterations (one batched policy call each). Two
rules make a run deterministic for a seed and a deterministic policy, whatever the
timing, and make a resumed run identical to an uninterrupted one:

- the group starting at iteration `s` samples the database exactly after iterations
  `< max(0, s - lag)` were inserted, where `lag = depth * batch`; iterations are inserted
  in order, and no further than `lag` behind the last generated iteration;
- every random draw of iteration `i` comes from a generator seeded by `(seed, i)`, and
  the policy seed of a group from `(seed, s)`.

Everything generated or evaluated goes to the journal before it counts (evo/journal.py).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from evo import prompts
from evo.journal import DUPLICATE, PARSE_ERROR, PENDING, Candidate, Journal
from evo.program import split
from evo.prompts import ParseFailure, Prompt, Shown
from evo.scores import Evaluation, scalarize
from evo.spec import PromptSettings, SearchSettings


class Evaluator(Protocol):
    def submit(self, code: str) -> Future: ...


class Archive(Protocol):
    """What the loop needs from the program database (evo/archive.py adapts evo.database)."""

    islands: int
    iterations: int  # iterations committed so far (durable)

    def key(self, code: str) -> str: ...  # the duplicate key of a program
    def keys(self) -> set[str]: ...  # the keys of every program in the database
    def sample(self, island: int, rng: np.random.Generator) -> tuple[list[Shown], list[Shown]]: ...
    def commit(self, batch: list[tuple[int, list[tuple[Candidate, Evaluation]]]]) -> None: ...
    # insert each iteration's evaluated candidates and count it, all in one transaction
    def best_scalar(self) -> float | None: ...
    def coverage(self) -> float: ...


@dataclass(frozen=True)
class LoopConfig:
    """The loop's settings; the defaults of the spec's settings are the spec's own."""

    iterations: int = SearchSettings.iterations
    seed: int = 0
    samples: int = SearchSettings.samples_per_prompt  # completions per prompt
    batch: int = 4  # prompts per policy call
    depth: int = 2  # policy calls that may run ahead of the database
    style: str = PromptSettings.style
    system: str = PromptSettings.system
    objectives: tuple[str, ...] = ()
    weights: tuple[float, ...] | None = None  # for the target check; None = equal weights
    stop: tuple[str, ...] = ()
    max_new_tokens: int | None = None  # None: 4096, or for `continue` twice the longest block + 64
    temperature: float = 1.0
    top_p: float = 1.0
    target: float | None = SearchSettings.target

    @property
    def lag(self) -> int:
        return self.depth * self.batch


@dataclass
class Progress:
    iteration: int = 0  # iterations committed
    best: float | None = None
    coverage: float = 0.0
    evaluations: int = 0  # evaluated over the whole run (journal)
    failures: int = 0
    session_evaluations: int = 0  # evaluated by this process (for the rate)
    parse_errors: int = 0
    duplicates: int = 0
    started: float = field(default_factory=time.monotonic)
    reached_target: bool = False

    @property
    def evals_per_s(self) -> float:
        return self.session_evaluations / max(time.monotonic() - self.started, 1e-9)


FLUSH_SECONDS = 0.5  # the longest a finished iteration waits for its database commit


def iteration_rng(seed: int, iteration: int) -> np.random.Generator:
    return np.random.default_rng([seed, iteration])


def auto_tokens(built: list) -> int:
    """The default completion budget: room for a whole program, or for finishing a block."""
    continuing = [prompt for _, prompt, _ in built if prompt.style == "continue"]
    if not continuing:
        return 4096
    return 64 + 2 * max(len(split(prompt.base.code).block) for prompt in continuing)


def policy_seed(seed: int, start: int) -> int:
    return int(np.random.SeedSequence([seed, start, 1]).generate_state(1)[0])


class Loop:
    def __init__(self, config: LoopConfig, policy, evaluator: Evaluator, archive: Archive,
                 journal: Journal, on_progress: Callable[[Progress], None] | None = None) -> None:
        self.config, self.policy, self.evaluator = config, policy, evaluator
        self.archive, self.journal, self.on_progress = archive, journal, on_progress
        self.progress = Progress()
        self._events: queue.Queue = queue.Queue()
        self._pending: dict[int, list[Candidate]] = {}
        self._results: dict[tuple[int, int], Evaluation] = {}
        self._futures: list[Future] = []
        self._generating = False
        self._last_commit = time.monotonic()
        self._reload()

    # -- state ---------------------------------------------------------------------------

    def _reload(self) -> None:
        """Pick up where the journal says: committed iterations, generated candidates, results."""
        self.committed = self.archive.iterations
        # killed between the database commit and the journal's mark: the database decides
        self.journal.mark_committed(range(self.journal.committed(), self.committed))
        self._seen = self.journal.hashes() | self.archive.keys()
        candidates = self.journal.candidates(since=self.committed)
        results = self.journal.evaluations(since=self.committed)
        for candidate in candidates:
            self._pending.setdefault(candidate.iteration, []).append(candidate)
        self._results.update(results)
        self.generated = max(self._pending, default=self.committed - 1) + 1
        self.progress.iteration = self.committed
        counts = self.journal.counts()
        self.progress.evaluations = counts["ok"] + counts["failed"]
        self.progress.failures, self.progress.parse_errors = counts["failed"], counts["parse"]
        self.progress.duplicates = counts["duplicate"]
        self.progress.best = self.archive.best_scalar()
        self.progress.coverage = self.archive.coverage()

    def _resubmit(self) -> None:
        for iteration, candidates in sorted(self._pending.items()):
            for candidate in candidates:
                if candidate.status == PENDING and (iteration, candidate.slot) not in self._results:
                    self._submit(candidate)

    # -- the pipeline --------------------------------------------------------------------

    def _target_reached(self) -> bool:
        target, best = self.config.target, self.progress.best
        return target is not None and best is not None and best >= target

    def run(self) -> Progress:
        self._resubmit()
        try:
            while self.committed < self.config.iterations and not self._target_reached():
                self._commit_ready()
                if self.committed >= self.config.iterations or self._target_reached():
                    break
                self._maybe_generate()
                self._handle(self._events.get())
        finally:
            for future in self._futures:
                future.cancel()
        self.progress.reached_target = self._target_reached()
        return self.progress

    def _maybe_generate(self) -> None:
        start = self.generated
        if self._generating or start >= self.config.iterations:
            return
        if self.committed < max(0, start - self.config.lag):
            return
        stop = min(start + self.config.batch, self.config.iterations)
        built = [self._build(i) for i in range(start, stop)]
        self._generating = True
        threading.Thread(target=self._generate, args=(start, built), daemon=True).start()

    def _build(self, iteration: int) -> tuple[int, Prompt, tuple]:
        rng = iteration_rng(self.config.seed, iteration)
        island = iteration % self.archive.islands
        parents, inspirations = self.archive.sample(island, rng)
        prompt = prompts.build(self.config.style, parents, inspirations, rng=rng,
                               system=self.config.system, objectives=self.config.objectives,
                               stop=self.config.stop)
        keys = tuple(p.key for p in parents)
        return island, prompt, keys

    def _generate(self, start: int, built: list) -> None:
        try:
            config = self.config
            replies = self.policy.generate(
                [prompt.text for _, prompt, _ in built], n=config.samples,
                max_new_tokens=config.max_new_tokens or auto_tokens(built), temperature=config.temperature,
                top_p=config.top_p, seed=policy_seed(config.seed, start), stop=built[0][1].stop)
            self._events.put(("generated", start, built, replies))
        except BaseException as error:  # re-raised in the main thread
            self._events.put(("error", error))

    def _handle(self, event: tuple) -> None:
        kind = event[0]
        if kind == "error":
            raise event[1]
        if kind == "generated":
            self._accept(*event[1:])
        elif kind == "evaluated":
            _, iteration, slot, future = event
            evaluation = future.result()
            self.journal.add_evaluation(iteration, slot, evaluation)
            self._results[(iteration, slot)] = evaluation
            self.progress.evaluations += 1
            self.progress.session_evaluations += 1
            self.progress.failures += not evaluation.ok

    def _accept(self, start: int, built: list, replies: list) -> None:
        """Parse and dedupe a group's replies in order, journal them, submit evaluations."""
        if len(replies) != len(built):
            raise RuntimeError(f"policy returned {len(replies)} reply lists for {len(built)} prompts")
        candidates: list[Candidate] = []
        for offset, ((island, prompt, keys), completions) in enumerate(zip(built, replies)):
            texts = [completion.text for completion in completions] or [None]
            for slot, text in enumerate(texts):
                candidates.append(self._candidate(start + offset, slot, island, prompt, keys, text))
        self.journal.add_candidates(candidates)
        for candidate in candidates:
            self._pending.setdefault(candidate.iteration, []).append(candidate)
            if candidate.status == PENDING:
                self._submit(candidate)
        self.generated = start + len(built)
        self._generating = False

    def _candidate(self, iteration: int, slot: int, island: int, prompt: Prompt, keys: tuple,
                   reply: str | None) -> Candidate:
        try:
            if reply is None:
                raise ParseFailure("the policy returned no completion for this prompt")
            code = prompts.parse(prompt, reply)
        except ParseFailure as failure:
            self.progress.parse_errors += 1
            return Candidate(iteration, slot, island, reply or "", "", keys, PARSE_ERROR, str(failure))
        digest = self.archive.key(code)
        if digest in self._seen:
            self.progress.duplicates += 1
            return Candidate(iteration, slot, island, code, digest, keys, DUPLICATE)
        self._seen.add(digest)
        return Candidate(iteration, slot, island, code, digest, keys)

    def _submit(self, candidate: Candidate) -> None:
        future = self.evaluator.submit(candidate.code)
        self._futures.append(future)
        future.add_done_callback(
            lambda f, i=candidate.iteration, s=candidate.slot: self._events.put(("evaluated", i, s, f)))

    def _ready(self, iteration: int) -> bool:
        candidates = self._pending.get(iteration)
        return candidates is not None and all(
            c.status != PENDING or (iteration, c.slot) in self._results for c in candidates)

    def _commit_ready(self) -> None:
        """Insert finished iterations in order, never further than `lag` behind generation,
        all ready ones in one database transaction, stopping at the one that hits the target."""
        limit = max(0, self.generated - self.config.lag) if self.generated < self.config.iterations \
            else self.config.iterations
        if not self._worth_committing(limit):
            return
        batch: list[tuple[int, list[tuple[Candidate, Evaluation]]]] = []
        iteration = self.committed
        while iteration < limit and self._ready(iteration) and not self._target_reached():
            evaluated = [(c, self._results[(iteration, c.slot)])
                         for c in self._pending[iteration] if c.status == PENDING]
            batch.append((iteration, evaluated))
            iteration += 1
            if self._hits_target(evaluated):
                break
        if batch:
            self._commit(batch)

    def _worth_committing(self, limit: int) -> bool:
        """Commit in batches (one durable transaction each): when everything up to `limit` is
        ready, at the end of the run, or after FLUSH_SECONDS. Evaluations are already in the
        journal, so waiting loses nothing; the timing never changes what gets inserted."""
        if self.generated >= self.config.iterations or self.config.target is not None:
            return True
        if time.monotonic() - self._last_commit > FLUSH_SECONDS:
            return True
        return all(self._ready(i) for i in range(self.committed, limit))

    def _hits_target(self, evaluated: list[tuple[Candidate, Evaluation]]) -> bool:
        target, weights = self.config.target, self.config.weights
        if target is None:
            return False
        for _, evaluation in evaluated:
            if evaluation.ok:
                w = np.ones(len(evaluation.scores)) if weights is None else np.asarray(weights)
                if float(scalarize(evaluation.scores, w)) >= target:
                    return True
        return False

    def _commit(self, batch: list[tuple[int, list[tuple[Candidate, Evaluation]]]]) -> None:
        self.archive.commit(batch)  # durable: the programs and the iteration count, one transaction
        self.journal.mark_committed([iteration for iteration, _ in batch])
        for iteration, _ in batch:
            for candidate in self._pending.pop(iteration):
                self._results.pop((iteration, candidate.slot), None)
        self.committed = batch[-1][0] + 1
        self._last_commit = time.monotonic()
        self._futures = [f for f in self._futures if not f.done()]
        progress = self.progress
        progress.iteration, progress.best = self.committed, self.archive.best_scalar()
        progress.coverage = self.archive.coverage()
        if self.on_progress is not None:
            self.on_progress(progress)


def run_loop(config: LoopConfig, policy, evaluator: Evaluator, archive: Archive, journal: Journal,
             on_progress: Callable[[Progress], None] | None = None) -> Progress:
    return Loop(config, policy, evaluator, archive, journal, on_progress).run()


__all__: Sequence[str] = ["Archive", "Evaluator", "Loop", "LoopConfig", "Progress", "run_loop"]
