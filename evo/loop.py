"""The evolution loop as ask / tell / commit, and the short runner that overlaps them.

    evolution = Evolution(LoopConfig.for_spec(spec), db)     # db: an open evo.database.Database
    while not evolution.done:
        group = evolution.ask()                              # the next group's prompts (None: commit first)
        if group is None:
            evolution.commit()                               # insert what is finished
            continue
        candidates = evolution.tell(group, policy.generate(group.texts, **group.options))
        evolution.commit((c, sandbox.evaluate(c.code)) for c in candidates)

Iterations are numbered from 0; one iteration is one prompt with `samples` completions, each
holding `m` programs (a set reply, evo/prompt_sets.py; m = 1 by default): completion j's
program k is the candidate in slot j * m + k.
Prompts are asked for in groups of `batch` iterations (one batched policy call each). Two
rules make a run deterministic for a seed and a deterministic policy, whatever the timing,
and make a resumed run identical to an uninterrupted one:

- the group starting at iteration `s` samples the database exactly after iterations
  `< max(0, s - lag)` were inserted, where `lag = depth * batch`; iterations are inserted
  in order, and no further than `lag` behind the last generated iteration (so at most
  `depth` groups are in flight: a bounded FIFO);
- every random draw of iteration `i` comes from a generator seeded by `(seed, i)`, and
  the policy seed of a group from `(seed, s)`; with several named policies, the one a
  group asks is chosen from `(seed, s)` and what the database holds at that point
  (evo/policy_mix.py).

Everything generated or evaluated is journaled in the run's database before it counts
(evo/database/journal.py); `Evolution(config, db)` on a killed run's database resumes it.
`run()` drives an Evolution with a policy called in the background and an evaluator pool.

Observers (`Evolution(config, db, observers=[...])`) are told what the loop does, in order:
`asking(group)` on the policy's thread just before the group's call, `told(Told)` with the
group's replies and what they became before they are journaled, and `committed(Committed)`
for each iteration before it is inserted. Each is told before the loop's own write, so an
observer that writes what it is told has it on disk whenever the journal does (the online
learner, training/online.py, is one).
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from evo import prompt_sets, prompts
from evo.database import Database
from evo.database.journal import DUPLICATE, PARSE_ERROR, PENDING, Candidate
from evo.database.records import Program
from evo.feedback import FAILURES_SHOWN
from evo.metrics import front
from evo.policies.base import check_replies
from evo.policy_mix import PolicyMix, PolicyTally
from evo.program import split
from evo.prompts import ParseFailure, Prompt, Shown
from evo.scores import Evaluation, real_values, scalarize, storable
from evo.spec import PromptSettings, SearchSettings


class Evaluator(Protocol):
    def submit(self, code: str) -> Future: ...


def _flag(help: str, *, minimum: int | None = None, sampling: bool = False) -> dict[str, Any]:
    """A RunOptions field's flag (evo/commands/params.py run_options): its help, and its rule:
    an integer >= `minimum`, or the policies' own range rule of the same name (`sampling`)."""
    return {"help": help, "minimum": minimum, "sampling": sampling}


@dataclass(frozen=True)
class RunOptions:
    """The loop settings a run takes from its command line rather than its spec: one `evo run`
    flag per field (--batch, --depth, ...), stored in the run's run.json (evo/run_dir.py)."""

    batch: int = field(default=4, metadata=_flag("prompts per policy call", minimum=1))
    depth: int = field(default=2, metadata=_flag("policy calls allowed ahead of the database", minimum=1))
    max_new_tokens: int | None = field(default=None, metadata=_flag(  # None: the policy's trained budget, else auto_tokens
        "completion budget per program (default: what the policy's checkpoint was trained to write, its "
        "train_config.json; else 4096, and for continue prompts twice the parent's block + 64)", sampling=True))
    temperature: float = field(default=1.0, metadata=_flag("sampling temperature (0: greedy)", sampling=True))
    top_p: float = field(default=1.0, metadata=_flag("nucleus sampling, in (0, 1]", sampling=True))

    @property
    def lag(self) -> int:
        """How far (in iterations) the database may lag behind the last generated iteration."""
        return self.depth * self.batch


@dataclass(frozen=True)
class LoopConfig(RunOptions):
    """The loop's settings: a run's RunOptions, and the spec's settings (whose defaults are the spec's own)."""

    iterations: int = SearchSettings.iterations
    seed: int = 0
    samples: int = SearchSettings.samples_per_prompt  # completions per prompt
    style: str = PromptSettings.style
    system: str = PromptSettings.system
    feedback: bool = PromptSettings.feedback  # show evaluator feedback and failed children with shown programs
    stop: tuple[str, ...] = ()
    target: float | None = SearchSettings.target
    max_program_bytes: int = SearchSettings.max_program_bytes  # larger proposals fail as "too_large", unevaluated
    answers: int = 1  # programs per reply for a policy not named in policy_answers
    policy_answers: tuple[tuple[str, int], ...] = ()  # (policy name, programs per reply): a checkpoint's trained m
    policy_styles: tuple[tuple[str, str], ...] = ()  # (policy name, prompt style) where it is not `style`
    policy_tokens: tuple[tuple[str, int], ...] = ()  # (policy name, tokens per program its checkpoint was trained to write)
    answers_by: str = SearchSettings.answers_by  # "completion": m programs in one | "samples": m completions of one prompt
    set_head: str = ""  # `continue` sets: the head's text with "{answers}" (the spec's [prompt] set_head file)
    head: str = ""  # `continue`: the prompt's whole text for any m, "{answers}" = m (the spec's [prompt] head file)
    separator: str = ""  # `continue` sets: between the programs of a reply ("": a marker line)
    answer_pattern: str = ""  # with a head: what each program of a reply matches (the spec's [prompt] answer_pattern)

    @classmethod
    def of(cls, search: SearchSettings, prompt: PromptSettings, seed: int = 0, run: RunOptions = RunOptions(),
           **changes: Any) -> "LoopConfig":
        """The settings a spec's [search] and [prompt] tables give (budget, samples, target, prompt),
        with the run's options; `changes`: fields replaced on top (e.g. iterations=6)."""
        given = dict(iterations=search.iterations, samples=search.samples_per_prompt, style=prompt.style,
                     system=prompt.system, target=search.target, feedback=prompt.feedback,
                     max_program_bytes=search.max_program_bytes, answers=search.answers or 1,
                     answers_by=search.answers_by, separator=prompt.separator, answer_pattern=prompt.answer_pattern,
                     set_head=Path(prompt.set_head).read_text(encoding="utf-8") if prompt.set_head else "",
                     head=Path(prompt.head).read_text(encoding="utf-8") if prompt.head else "")
        options = {f.name: getattr(run, f.name) for f in fields(RunOptions)}
        return cls(seed=seed, **{**options, **given, **changes})

    @classmethod
    def for_spec(cls, spec, seed: int = 0, run: RunOptions = RunOptions(), **changes: Any) -> "LoopConfig":
        """The settings a spec gives (LoopConfig.of its [search] and [prompt] tables)."""
        return cls.of(spec.search, spec.prompt, seed, run, **changes)

    def style_for(self, policy: str) -> str:
        """The prompt style the named policy is asked in."""
        return dict(self.policy_styles).get(policy, self.style)

    def asked(self, policy: str) -> tuple[int, int]:
        """(programs per completion, completions per prompt) for the named policy."""
        return asked(dict(self.policy_answers).get(policy, self.answers), self.samples, self.answers_by)

    def tokens_for(self, policy: str, built: Sequence[Prompt]) -> int:
        """The completion budget per program for the named policy asked `built`: the run's
        --max-new-tokens, else what its checkpoint was trained to write, else auto_tokens."""
        return self.max_new_tokens or dict(self.policy_tokens).get(policy) or auto_tokens(built)

    def reply_cap(self, m: int = 1) -> int:
        """A longer reply asked for `m` programs is unparseable without being parsed (room for
        m programs, their edits and prose)."""
        return m * REPLY_FACTOR * self.max_program_bytes + REPLY_SLACK


def asked(m: int, samples: int, by: str) -> tuple[int, int]:
    """(programs per completion, completions per prompt) when a policy answers with m programs
    a reply and a prompt gets `samples` replies: m programs in one completion ("completion"),
    or m completions of one program each ("samples")."""
    return (1, samples * m) if by == "samples" else (m, samples)


@dataclass
class Progress:
    iteration: int = 0  # iterations committed
    best: float | None = None
    coverage: float | None = None  # MAP-Elites cells filled; None when the spec declares no features
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


@dataclass(frozen=True)
class PromptGroup:
    """One batched policy call: the prompts of iterations start, start + 1, ..."""

    start: int
    prompts: tuple[Prompt, ...]
    islands: tuple[int, ...]
    parents: tuple[tuple, ...]  # per prompt: the ids of the programs shown as parents
    options: dict[str, Any]  # keyword arguments of Policy.generate (n, seed, max_new_tokens, ...)
    policy: str = ""  # the name of the policy to ask (evo/policy_mix.py)
    answers: int = 1  # programs asked for in each completion

    @property
    def texts(self) -> list[str]:
        return [prompt.text for prompt in self.prompts]


@dataclass(frozen=True)
class Told:
    """One group's replies as the loop was told them, and what they became."""

    group: PromptGroup
    replies: tuple[tuple[Any, ...], ...]  # per prompt, the policy's completions
    candidates: tuple[Candidate, ...]  # the journal slots the replies filled (iteration, slot, status, ...)
    front: np.ndarray  # (p, d) the front of the programs the group's prompts were sampled from (evo.metrics.front)


@dataclass(frozen=True)
class Committed:
    """One iteration as it is inserted: its candidates and their evaluations by slot (a duplicate's
    is the evaluation of the program it repeats, when the run has it)."""

    iteration: int
    candidates: tuple[Candidate, ...]
    evaluations: Mapping[int, Evaluation]


class Observer(Protocol):
    """What the loop tells a watcher (see the module doc for when)."""

    def asking(self, group: PromptGroup) -> None: ...

    def told(self, told: Told) -> None: ...

    def committed(self, iterations: Sequence[Committed]) -> None: ...


FLUSH_SECONDS = 0.5  # the longest a finished iteration waits for its database commit
REPLY_FACTOR, REPLY_SLACK = 4, 4096  # the reply cap: m x REPLY_FACTOR x max_program_bytes + REPLY_SLACK bytes


def iteration_rng(seed: int, iteration: int) -> np.random.Generator:
    return np.random.default_rng([seed, iteration])


def auto_tokens(built: Sequence[Prompt]) -> int:
    """The default completion budget per program: room for a whole program, or for finishing a block."""
    continuing = [prompt for prompt in built if prompt.style == "continue"]
    if not continuing:
        return 4096
    return 64 + 2 * max(len(split(prompt.base.code).block) for prompt in continuing)


def policy_seed(seed: int, start: int) -> int:
    return int(np.random.SeedSequence([seed, start, 1]).generate_state(1)[0])


def choice_rng(seed: int, start: int) -> np.random.Generator:
    """The draw that picks the policy of the group starting at `start`."""
    return np.random.default_rng([seed, start, 2])


class Evolution:
    """The search's state between policy calls: ask for prompts, tell replies, commit evaluations."""

    def __init__(self, config: LoopConfig, db: Database, policy: str | PolicyMix = "",
                 observers: Sequence[Observer] = ()) -> None:
        """`policy`: the name stored with each program, or a PolicyMix of several named policies."""
        self.mix = policy if isinstance(policy, PolicyMix) else PolicyMix((policy,), (1.0,))
        self.observers = tuple(observers)
        self._front: tuple[int, np.ndarray] | None = None  # front_at's last (cutoff, front)
        self._tally = PolicyTally()  # for the bandit: what the stored programs of each policy did
        self.config, self.db, self.policy = config, db, self.mix.names[0]
        self.objectives = db.config.objectives
        self.progress = Progress()
        self._pending: dict[int, list[Candidate]] = {}  # iteration -> its candidates, until inserted
        self._results: dict[tuple[int, int], Evaluation] = {}
        self._last_commit = time.monotonic()
        self._resume()

    def _resume(self) -> None:
        """Pick up where the database says: committed iterations, generated candidates, results."""
        journal = self.db.journal
        self.committed = self.db.iteration
        self._seen = journal.hashes() | set(self.db.seen)
        self._proposed = Counter({(policy, status): n for policy, status, n in journal.policy_counts()})
        for candidate in journal.candidates(since=self.committed):
            self._pending.setdefault(candidate.iteration, []).append(candidate)
        self._results.update(journal.evaluations(since=self.committed))
        self.generated = max(self._pending, default=self.committed - 1) + 1
        counts = journal.counts()
        progress = self.progress
        progress.iteration, progress.evaluations = self.committed, counts["ok"] + counts["failed"]
        progress.failures, progress.parse_errors = counts["failed"], counts["parse"]
        progress.duplicates = counts["duplicate"]
        self._refresh()

    def unevaluated(self) -> list[Candidate]:
        """Journaled candidates still waiting for their evaluation (after a resume)."""
        return [c for iteration, candidates in sorted(self._pending.items()) for c in candidates
                if c.status == PENDING and (iteration, c.slot) not in self._results]

    @property
    def done(self) -> bool:
        return self.committed >= self.config.iterations or self._target_reached()

    def _target_reached(self) -> bool:
        target, best = self.config.target, self.progress.best
        return target is not None and best is not None and best >= target

    # -- ask -------------------------------------------------------------------------------

    def ask(self) -> PromptGroup | None:
        """The next group's prompts, or None while the database is `lag` behind (commit
        first) or when every iteration is generated."""
        start, config = self.generated, self.config
        if self.done or start >= config.iterations or self.committed < max(0, start - config.lag):
            return None
        policy = self._choose_policy(start)
        m, n = config.asked(policy)
        style = config.style_for(policy)
        built = [self._build(i, m, style) for i in range(start, min(start + config.batch, config.iterations))]
        prompts_ = tuple(prompt for _, prompt, _ in built)
        options = dict(n=n, max_new_tokens=m * config.tokens_for(policy, prompts_),
                       temperature=config.temperature, top_p=config.top_p, seed=policy_seed(config.seed, start),
                       stop=prompts_[0].stop)
        return PromptGroup(start, prompts_, tuple(i for i, _, _ in built), tuple(k for _, _, k in built), options,
                           policy, m)

    def _choose_policy(self, start: int) -> str:
        """By weight or by the bandit over what the journal and the committed programs say now
        (both fixed by the lag rule, so a seeded run chooses the same)."""
        mix = self.mix
        if len(mix.names) == 1:
            return mix.names[0]
        proposed = ((policy, status, n) for (policy, status), n in self._proposed.items())
        stats = self._tally.add(self.db.programs).stats(proposed) if mix.choice == "ucb" else None
        return mix.choose(choice_rng(self.config.seed, start), stats)

    def _build(self, iteration: int, m: int, style: str) -> tuple[int, Prompt, tuple]:
        config, minimize = self.config, self.db.config.minimize
        rng = iteration_rng(config.seed, iteration)
        island = iteration % len(self.db.islands)
        parents, inspirations = self._sample(island, rng)
        head = config.head if style == "continue" else ""  # a policy asked in its own style builds its own
        prompt = prompts.build(style, parents, inspirations, rng=rng, system=config.system,
                               objectives=self.objectives, minimize=minimize, stop=config.stop, head=head,
                               pattern=config.answer_pattern)
        prompt = prompt_sets.widen(prompt, m, objectives=self.objectives, minimize=minimize,
                                   set_head=config.set_head or head, separator=config.separator)
        return island, prompt, tuple(p.key for p in parents)

    def _sample(self, island: int, rng: np.random.Generator) -> tuple[list[Shown], list[Shown]]:
        parents, inspirations = self.db.sample(island, rng)
        if not parents:  # an island emptied by eviction or reset: start from the best
            best = self.db.best()
            parents = [best] if best is not None else []
        return [self._shown(p) for p in parents], [self._shown(p) for p in inspirations]

    def _shown(self, program: Program) -> Shown:
        scores = real_values(program.vector, self.objectives, self.db.config.minimize)  # as the scorer reported them
        if not self.config.feedback:
            return Shown(program.code, program.value, scores, program.id)
        failed = tuple((child.failure_kind or "", child.failure_message or "", child.feedback)
                       for child in self.db.failed_children(program, FAILURES_SHOWN))
        return Shown(program.code, program.value, scores, program.id, program.feedback, failed)

    # -- tell ------------------------------------------------------------------------------

    def tell(self, group: PromptGroup, replies: Sequence[Sequence[Any]]) -> list[Candidate]:
        """Parse and dedupe a group's replies in order and journal them; returns the
        candidates to evaluate."""
        if group.start != self.generated:
            raise RuntimeError(f"told group {group.start}, expected {self.generated}")
        if len(replies) != len(group.prompts):
            raise RuntimeError(f"policy returned {len(replies)} reply lists for {len(group.prompts)} prompts")
        candidates: list[Candidate] = []
        for offset, (prompt, completions) in enumerate(zip(group.prompts, replies)):
            iteration, island, parents = group.start + offset, group.islands[offset], group.parents[offset]
            for j, completion in enumerate(completions or [None]):
                made = (self._set_candidates(iteration, j, island, prompt, parents, completion) if prompt.answers > 1
                        else [self._candidate(iteration, j, island, prompt, parents, completion and completion.text)])
                candidates += [replace(c, policy=group.policy) for c in made]
        rejected = [(c, e) for c in candidates if c.status == PENDING and (e := self._rejection(c)) is not None]
        if self.observers:
            told = Told(group, tuple(tuple(r) for r in replies), tuple(candidates), self.front_at(group.start))
            for observer in self.observers:
                observer.told(told)
        with self.db.journal.store.transaction():  # a rejection is journaled with its candidate
            self.db.journal.add_candidates(candidates)
            self.db.journal.add_evaluations(rejected)
        self._proposed.update((c.policy, c.status) for c in candidates)
        for candidate in candidates:
            self._pending.setdefault(candidate.iteration, []).append(candidate)
        for candidate, evaluation in rejected:
            self._results[(candidate.iteration, candidate.slot)] = evaluation
            self.progress.evaluations += 1
            self.progress.failures += 1
        self.generated = group.start + len(group.prompts)
        return [c for c in candidates if c.status == PENDING and (c.iteration, c.slot) not in self._results]

    def _rejection(self, candidate: Candidate) -> Evaluation | None:
        """The failure of a candidate refused before evaluation (a program over max_program_bytes)."""
        size = len(candidate.code.encode("utf-8"))
        if size <= self.config.max_program_bytes:
            return None
        return Evaluation.failed("too_large", f"the program is {size} bytes, over [search] max_program_bytes "
                                              f"({self.config.max_program_bytes}); it was not evaluated")

    def _candidate(self, iteration: int, slot: int, island: int, prompt: Prompt, parents: tuple,
                   reply: str | None) -> Candidate:
        try:
            problem = self._reply_problem(reply)
            if problem or reply is None:
                raise ParseFailure(problem)
            code = prompts.parse(prompt, reply)
        except ParseFailure as failure:
            return self._unparsed(iteration, slot, island, parents, reply, failure)
        return self._proposed_program(iteration, slot, island, parents, code)

    def _set_candidates(self, iteration: int, reply_index: int, island: int, prompt: Prompt, parents: tuple,
                        completion) -> list[Candidate]:
        """The `prompt.answers` candidates of one set reply: each program parsed, failed or deduped alone.
        The reply is journaled once, with its first unparseable program; the others name that slot."""
        m, reply = prompt.answers, None if completion is None else completion.text
        problem = self._reply_problem(reply, m)
        found = ([ParseFailure(problem)] * m if problem or reply is None
                 else prompt_sets.programs(prompt, reply, cut=completion.finish_reason == "length"))
        made: list[Candidate] = []
        kept_at = None  # the slot that journals the reply
        for k, program in enumerate(found):
            slot = reply_index * m + k
            if isinstance(program, ParseFailure):
                text = reply if kept_at is None else f"(the reply is journaled once, with slot {kept_at})"
                kept_at = slot if kept_at is None else kept_at
                candidate = self._unparsed(iteration, slot, island, parents, text, program, m)
            else:
                candidate = self._proposed_program(iteration, slot, island, parents, program)
            made.append(replace(candidate, answer=k))
        return made

    def _reply_problem(self, reply: str | None, m: int = 1) -> str:
        if reply is None:
            return "the policy returned no completion for this prompt"
        return reply_problem(reply, self.config.reply_cap(m))

    def _unparsed(self, iteration: int, slot: int, island: int, parents: tuple, reply: str | None,
                  failure: ParseFailure, m: int = 1) -> Candidate:
        self.progress.parse_errors += 1
        kept = storable((reply or "")[:self.config.reply_cap(m)])  # what the journal keeps of it: bounded, valid text
        return Candidate(iteration, slot, island, kept, "", parents, PARSE_ERROR, str(failure))

    def _proposed_program(self, iteration: int, slot: int, island: int, parents: tuple, code: str) -> Candidate:
        digest = self.db.dedupe_key(code)
        if digest in self._seen:
            self.progress.duplicates += 1
            return Candidate(iteration, slot, island, code, digest, parents, DUPLICATE)
        self._seen.add(digest)
        return Candidate(iteration, slot, island, code, digest, parents)

    # -- commit ----------------------------------------------------------------------------

    def commit(self, evaluated: Iterable[tuple[Candidate, Evaluation]] = ()) -> Progress:
        """Journal evaluations, then insert finished iterations in order (one transaction)."""
        evaluated = list(evaluated)
        if evaluated:
            self.db.journal.add_evaluations(evaluated)
            for candidate, evaluation in evaluated:
                self._results[(candidate.iteration, candidate.slot)] = evaluation
                self.progress.evaluations += 1
                self.progress.session_evaluations += 1
                self.progress.failures += not evaluation.ok
        self._insert_ready()
        return self.progress

    def _ready(self, iteration: int) -> bool:
        candidates = self._pending.get(iteration)
        return candidates is not None and all(
            c.status != PENDING or (iteration, c.slot) in self._results for c in candidates)

    def _insert_ready(self) -> None:
        """Insert finished iterations in order, never further than `lag` behind generation,
        stopping at the one that hits the target."""
        config = self.config
        limit = max(0, self.generated - config.lag) if self.generated < config.iterations else config.iterations
        if not self._worth_inserting(limit):
            return
        batch: list[tuple[int, list[tuple[Candidate, Evaluation]]]] = []
        iteration = self.committed
        while iteration < limit and self._ready(iteration) and not self._target_reached():
            evaluated = [(c, self._results[(iteration, c.slot)]) for c in self._pending[iteration] if c.status == PENDING]
            batch.append((iteration, evaluated))
            iteration += 1
            if self._hits_target(evaluated):
                break
        if batch:
            self._insert(batch)

    def _worth_inserting(self, limit: int) -> bool:
        """Insert in batches (one durable transaction each): when everything up to `limit` is
        ready, at the end of the run, or after FLUSH_SECONDS. Evaluations are already journaled,
        so waiting loses nothing; the timing never changes what gets inserted."""
        if self.generated >= self.config.iterations or self.config.target is not None:
            return True
        if time.monotonic() - self._last_commit > FLUSH_SECONDS:
            return True
        return all(self._ready(i) for i in range(self.committed, limit))

    def _hits_target(self, evaluated: list[tuple[Candidate, Evaluation]]) -> bool:
        target = self.config.target
        return target is not None and any(
            e.scores is not None and float(scalarize(e.scores, self.db.weights)) >= target for _, e in evaluated)

    def front_at(self, start: int) -> np.ndarray:
        """(p, d) the front of the evaluated programs the group starting at `start` was sampled
        from: the initial programs and those of the iterations < max(0, start - lag) (fixed once
        those are inserted, so the last one is kept)."""
        cutoff = max(0, start - self.config.lag)
        if self._front is None or self._front[0] != cutoff:
            self._front = (cutoff, front(self.db.store.scores_before(cutoff), len(self.objectives)))
        return self._front[1]

    def _tell_committed(self, batch: list[tuple[int, list[tuple[Candidate, Evaluation]]]]) -> None:
        repeated = [c.hash for iteration, _ in batch for c in self._pending[iteration] if c.status == DUPLICATE]
        originals = self.db.journal.originals(repeated) if repeated else {}
        told = []
        for iteration, evaluated in batch:
            evaluations = {c.slot: e for c, e in evaluated}
            candidates = tuple(self._pending[iteration])
            evaluations.update({c.slot: originals[c.hash] for c in candidates
                                if c.status == DUPLICATE and c.hash in originals})
            told.append(Committed(iteration, candidates, evaluations))
        for observer in self.observers:
            observer.committed(told)

    def _insert(self, batch: list[tuple[int, list[tuple[Candidate, Evaluation]]]]) -> None:
        if self.observers:
            self._tell_committed(batch)
        self.db.commit_iterations(batch, self.policy)  # programs and the counter, one transaction
        for iteration, _ in batch:
            for candidate in self._pending.pop(iteration):
                self._results.pop((iteration, candidate.slot), None)
        self.committed = batch[-1][0] + 1
        self._last_commit = time.monotonic()
        self._refresh()

    def _refresh(self) -> None:
        best = self.db.best()
        self.progress.iteration, self.progress.best = self.committed, None if best is None else best.value
        self.progress.coverage = float(self.db.archive.coverage) if self.db.config.features else None
        self.progress.reached_target = self._target_reached()


def reply_problem(reply: str, cap: int) -> str:
    """Why a reply is refused before parsing (over `cap` UTF-8 bytes, or not valid text), or ''."""
    if len(reply) > cap:
        return f"the reply has {len(reply)} characters, over the {cap}-byte reply cap (programs asked x {REPLY_FACTOR} x [search] max_program_bytes + {REPLY_SLACK})"
    try:
        size = len(reply.encode("utf-8"))
    except UnicodeEncodeError as error:
        return f"the reply is not valid text (a lone surrogate at character {error.start}); it was not evaluated"
    if size > cap:
        return f"the reply is {size} bytes, over the {cap}-byte reply cap (programs asked x {REPLY_FACTOR} x [search] max_program_bytes + {REPLY_SLACK})"
    return ""


def in_background(work: Callable[[], Any]) -> Future:
    """Run `work` on a daemon thread (a stuck policy call never blocks the process's exit)."""
    future: Future = Future()

    def target() -> None:
        try:
            future.set_result(work())
        except BaseException as error:  # re-raised by future.result() in the caller
            future.set_exception(error)

    threading.Thread(target=target, daemon=True).start()
    return future


def run(evolution: Evolution, policy, evaluator: Evaluator,
        on_progress: Callable[[Progress], None] | None = None) -> Progress:
    """Drive `evolution` to its budget or target: one policy call at a time in the background,
    evaluations in the evaluator's pool, commits as they finish. `policy`: a Policy, or a
    mapping name -> Policy for a run of several (each group names its own)."""

    def generate(group: PromptGroup):
        for observer in evolution.observers:
            observer.asking(group)
        chosen = policy[group.policy] if isinstance(policy, Mapping) else policy
        replies = chosen.generate(group.texts, **group.options)
        return check_replies(replies, len(group.texts), group.options["n"], f"policy {group.policy!r}")

    evaluating: dict[Future, Candidate] = {evaluator.submit(c.code): c for c in evolution.unevaluated()}
    call: tuple[PromptGroup, Future] | None = None
    committed = evolution.committed
    try:
        while not evolution.done:
            if call is None and (group := evolution.ask()) is not None:
                call = (group, in_background(functools.partial(generate, group)))
            waiting = [*evaluating, *([call[1]] if call else [])]
            wait(waiting, timeout=FLUSH_SECONDS, return_when=FIRST_COMPLETED)
            if call is not None and call[1].done():
                group, replies = call[0], call[1].result()
                call = None
                evaluating.update((evaluator.submit(c.code), c) for c in evolution.tell(group, replies))
            finished = [future for future in evaluating if future.done()]
            progress = evolution.commit([(evaluating.pop(f), f.result()) for f in finished])
            if progress.iteration != committed and on_progress is not None:
                committed = progress.iteration
                on_progress(progress)
    finally:
        for future in evaluating:
            future.cancel()
    return evolution.progress


__all__: Sequence[str] = ["Committed", "Evaluator", "Evolution", "LoopConfig", "Observer", "Progress", "PromptGroup", "Told", "run"]
