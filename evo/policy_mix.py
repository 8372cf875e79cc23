"""Several policies in one run: which one proposes the next group, and how each has done.

A run names its policies (`--policy fast=URI --policy big=URI`; a bare URI is named by
itself). Each group of prompts (one batched policy call) goes to one policy, chosen by
`[search] policy_choice`:

- "weights": at random in proportion to `[search] policy_weights` (a policy not named
  there weighs 1; weight 0 = never asked);
- "ucb": the UCB1 bandit on the rate of improvements: an untried policy first, then the
  highest `improvements / proposals + sqrt(2 ln(all proposals) / proposals)`. Proposals
  count every candidate a policy sampled (unparseable and duplicate ones too, and those
  still being evaluated: a policy in flight is not chosen again just for lack of news);
  an improvement is an evaluated child whose scalar beats the best of its parents.

Both read only what the loop's determinism rules fix (the journal and the committed
programs at ask time) and the iteration's own generator, so a seeded run chooses the same.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields

import numpy as np

from evo.database.config import POLICY_CHOICES as CHOICES
from evo.database.records import Program
from evo.errors import UserError

INITIAL = "initial"  # the policy name of the initial program(s) (Database.add_initial)


@dataclass(frozen=True)
class PolicyStats:
    """What one policy proposed and what came of it."""

    proposals: int = 0  # candidate programs proposed (parsed or not)
    replies: int = 0  # policy completions (a set reply proposes several programs)
    unparseable: int = 0
    duplicates: int = 0
    evaluated: int = 0  # stored programs (successes and failures)
    failures: int = 0
    improvements: int = 0  # evaluated children scoring above the best of their parents

    @property
    def rate(self) -> float:
        return self.improvements / self.proposals if self.proposals else 0.0

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class PolicyMix:
    names: tuple[str, ...]
    weights: tuple[float, ...]
    choice: str = "weights"

    @classmethod
    def of(cls, names: Iterable[str], weights: Mapping[str, float] | None = None, choice: str = "weights") -> "PolicyMix":
        """The run's policies with their weights (checked by SearchSettings); a one-line UserError
        when the weights name a policy the run does not have or leave none to ask."""
        names, weights = tuple(names), dict(weights or {})
        unknown = sorted(set(weights) - set(names))
        if unknown:
            raise UserError(f"[search] policy_weights names {unknown}, which are not among the policies {list(names)}; "
                            "name them with --policy NAME=URI")
        if choice not in CHOICES:
            raise UserError(f"[search] policy_choice must be one of {', '.join(map(repr, CHOICES))}, got {choice!r}")
        vector = tuple(float(weights.get(name, 1.0)) for name in names)
        if not all(math.isfinite(w) and w >= 0 for w in vector) or not math.isfinite(sum(vector)):
            raise UserError(f"[search] policy_weights must be finite numbers >= 0 with a finite sum (they are normalized "
                            f"to probabilities), got {dict(zip(names, vector))}"[:300])
        if not names or sum(vector) <= 0:
            raise UserError("[search] policy_weights: at least one policy needs a positive weight")
        return cls(names, vector, choice)

    def choose(self, rng: np.random.Generator, stats: Mapping[str, PolicyStats] | None = None) -> str:
        """The policy of the next group: by weight, or by UCB over `stats`."""
        if len(self.names) == 1:
            return self.names[0]
        if self.choice == "ucb":
            return ucb(self.names, self.weights, stats or {})
        p = np.asarray(self.weights) / sum(self.weights)
        return self.names[int(rng.choice(len(self.names), p=p))]


def ucb(names: tuple[str, ...], weights: tuple[float, ...], stats: Mapping[str, PolicyStats]) -> str:
    """UCB1 over the policies of positive weight; ties go to the earlier name."""
    live = [name for name, w in zip(names, weights) if w > 0]
    counts = [stats.get(name, PolicyStats()) for name in live]
    for name, s in zip(live, counts):
        if s.proposals == 0:
            return name
    total = sum(s.proposals for s in counts)
    values = [s.rate + math.sqrt(2.0 * math.log(total) / s.proposals) for s in counts]
    return live[int(np.argmax(values))]


def is_initial(program: Program) -> bool:
    """One of the run's initial programs: stored under INITIAL with no parents (a policy may be
    named "initial" too; its children always have parents, so they count like any other's)."""
    return program.policy == INITIAL and not program.parents


def improved(program: Program, programs: Mapping[int, Program]) -> bool:
    """An evaluated child scoring above the best of its (stored) parents."""
    if not program.ok:
        return False
    scalars = [programs[p].value for p in program.parents if p in programs and programs[p].ok]
    return not scalars or program.value > max(scalars)


class PolicyTally:
    """Per policy: evaluated, failures, improvements of the stored programs, counted once each
    as the run grows (ids only grow, and a stored program's outcome never changes)."""

    def __init__(self) -> None:
        self.counted = 0  # the highest program id counted
        self.rows: dict[str, Counter] = defaultdict(Counter)

    def add(self, programs: Mapping[int, Program]) -> "PolicyTally":
        """Count the programs of `programs` (by id, in id order) not counted yet."""
        top = max(programs, default=0)
        for program_id in range(self.counted + 1, top + 1):
            program = programs.get(program_id)
            if program is None or program.is_copy or is_initial(program):
                continue
            self.rows[program.policy].update(evaluated=1, failures=int(not program.ok),
                                             improvements=int(improved(program, programs)))
        self.counted = max(self.counted, top)
        return self

    def stats(self, statuses: Iterable[tuple[str, str, int]], names: Iterable[str] = (),
              replies: Mapping[str, int] | None = None) -> dict[str, PolicyStats]:
        """With the journal's (policy, candidate status, count) rows; `names`: the run's policies
        (listed even when never asked); `replies`: completions by policy (journal.reply_counts;
        None: one program per reply). A candidate journaled before policies were recorded
        (policy '') belongs to the run's one policy when its programs name just one."""
        rows: dict[str, Counter] = {name: Counter() for name in names}
        rows.update((name, Counter(row)) for name, row in self.rows.items())
        named = [name for name in rows if name]
        for policy, status, count in statuses:
            row = rows.setdefault(policy or (named[0] if len(named) == 1 else ""), Counter())
            row.update(proposals=count, unparseable=count if status == "parse" else 0,
                       duplicates=count if status == "duplicate" else 0, replies=count if replies is None else 0)
        for policy, count in (replies or {}).items():
            rows.setdefault(policy or (named[0] if len(named) == 1 else ""), Counter()).update(replies=count)
        return {name: PolicyStats(**row) for name, row in rows.items()}


def policy_stats(statuses: Iterable[tuple[str, str, int]], programs: Mapping[int, Program],
                 names: Iterable[str] = (), replies: Mapping[str, int] | None = None) -> dict[str, PolicyStats]:
    """Per policy, from the journal's (policy, status, count) rows and the stored programs by id."""
    return PolicyTally().add(programs).stats(statuses, names, replies)


def policy_table(statuses: Iterable[tuple[str, str, int]], programs: Mapping[int, Program],
                 names: Iterable[str] = (), replies: Mapping[str, int] | None = None) -> dict[str, dict[str, int]]:
    """`policy_stats` as plain values by policy name, sorted: what `evo show --json` and `evo report` print."""
    return {name: s.as_dict() for name, s in sorted(policy_stats(statuses, programs, names, replies).items())}
