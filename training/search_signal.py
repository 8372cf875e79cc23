"""What a search proposal earns, and the front F it is measured against: the one rule that
`evo train --spec` (training/spec_task.py) and `evo run --train` (training/online.py) share.

    kinds, scores = outcome(committed.candidates, committed.evaluations, slots, d)   # one prompt, as the loop commits it
    rewards(Proposals(kinds, scores, fronts), duplicates="penalty", failures="floor")  # (B, G, 1, d) for the estimator

A proposal is one completion of a prompt (a group is one prompt's completions). What it became
(`KINDS`): a valid program (evaluated, with scores), a failed evaluation, an unparseable reply,
a reply cut off by the token budget, or a duplicate of a program the run already had.

- valid: its score vector.
- failed, unparseable, cut off: the FLOOR, the worst outcome: per objective, `low - gap`, where
  `low` and `high` are the minimum and maximum over the group's valid programs, the programs
  its duplicates repeat, and the prompt's front F, and `gap = high - low` (max(1, |low|) where
  that is 0). So a failure is below every program of its group and of F on every objective, whatever their sign, and a
  `minimize` objective (negated in the score vector) is safe: no weighting prefers a failure.
  (`failures = "zero"` instead scores them a zero vector, as the raw scores of a task do; unsafe
  with negative or minimized objectives.)
- a duplicate, by the named rule `duplicates` (DUPLICATE_RULES): "penalty" (the default,
  `low - PENALTY x gap`: below every valid program, above a failure, so re-finding the best is
  not punished like a failure), "worst" (what a failure earns), "score" (the score of the
  program it repeats; what a failure earns when that failed), "zero" (a zero vector; unsafe with
  negative or minimized objectives).

Task families (`evo train --task`, the TRL and veRL rewards) score an answer that does not parse
zeros instead (tasks/completions.py): their objectives lie in [0, 1], where zero is the worst
value; a spec's objectives may be negative or minimized, which is why a proposal's failure
earns the floor here.

Front F of a prompt: the front of the evaluated programs its group was sampled from, as the
loop tells it (evo.loop.Told.front: the initial programs and the iterations `< max(0, s - lag)`
for the group starting at s; lag = the loop's depth x batch, 0 for `evo train --spec`).

Nothing to learn (`idle_cause`): a step whose proposals hold no valid program (all failed, all
repeated) or whose advantages are all zero teaches nothing; `IDLE_STEPS` such steps in a row
stop the training with one line naming the cause and what to do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evo.database.journal import DUPLICATE as DUPLICATE_STATUS
from evo.database.journal import PARSE_ERROR, Candidate
from evo.scores import Evaluation

KINDS = ("valid", "failed", "unparsed", "cut", "duplicate")  # what a proposal became; codes are the indices
VALID, FAILED, UNPARSED, CUT, DUPLICATE = range(len(KINDS))
DUPLICATE_RULES = {
    "penalty": "a small penalty below the group's worst valid program, above a failure",
    "worst": "what a failure earns",
    "score": "the score of the program it repeats",
    "zero": "a zero vector (unsafe with negative or minimized objectives)",
}
DEFAULT_DUPLICATES = "penalty"
FAILURE_RULES = {
    "floor": "below every valid program of the group and of the front F (the default)",
    "zero": "a zero vector (unsafe with negative or minimized objectives)",
}
DEFAULT_FAILURES = "floor"
PENALTY = 0.1  # a duplicate under "penalty" sits this fraction of the gap below the group's worst
IDLE_STEPS = 5  # steps in a row with nothing to learn before training stops (0: never)
FLAT = 1e-12  # a step whose mean |advantage| is at most this learned nothing


@dataclass(frozen=True)
class Proposals:
    """One step's proposals as arrays (B prompts, G completions each, d objectives)."""

    kinds: np.ndarray  # (B, G) int: KINDS codes
    scores: np.ndarray  # (B, G, d): a valid program's scores, a duplicate's original's; NaN otherwise
    fronts: np.ndarray  # (B, p, d): each prompt's front F, NaN-padded


def outcome(candidates: Sequence[Candidate], evaluations: Mapping[int, Evaluation], slots: int,
            d: int) -> tuple[np.ndarray, np.ndarray]:
    """What the `slots` journal slots of one prompt became, as the loop commits it
    (evo.loop.Committed): (slots,) KINDS codes and (slots, d) scores (a valid program's, a
    duplicate's original's; NaN otherwise). A slot no candidate filled is unparsed; CUT is
    the caller's to mark (`cut_off`): only the completion knows it hit the token budget."""
    kinds = np.full(slots, UNPARSED)
    scores = np.full((slots, d), np.nan)
    for candidate in candidates:
        if not 0 <= candidate.slot < slots or candidate.status == PARSE_ERROR:
            continue
        evaluation = evaluations.get(candidate.slot)
        if candidate.status == DUPLICATE_STATUS:
            kinds[candidate.slot] = DUPLICATE
            if evaluation is not None and evaluation.ok:
                scores[candidate.slot] = evaluation.scores
        elif evaluation is not None and evaluation.ok:
            kinds[candidate.slot], scores[candidate.slot] = VALID, evaluation.scores
        else:
            kinds[candidate.slot] = FAILED
    return kinds, scores


def cut_off(kinds: np.ndarray, cut: np.ndarray) -> np.ndarray:
    """`kinds` with every proposal whose completion the token budget cut marked CUT (a cut
    completion that did not parse is CUT too: the budget is the cause to name)."""
    return np.where(np.asarray(cut, dtype=bool), CUT, kinds)


def floor(scores: np.ndarray, front_: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(low, gap) of one group, each (d,): over the finite rows of its scores (G, d) and its front (p, d)."""
    d = scores.shape[-1]
    rows = np.concatenate([scores.reshape(-1, d), front_.reshape(-1, d)])
    rows = rows[np.isfinite(rows).all(axis=1)]
    if not len(rows):
        return np.zeros(d), np.ones(d)
    low, high = rows.min(axis=0), rows.max(axis=0)
    gap = high - low
    return low, np.where(gap > 0, gap, np.maximum(1.0, np.abs(low)))


def rewards(proposals: Proposals, duplicates: str = DEFAULT_DUPLICATES, failures: str = DEFAULT_FAILURES) -> np.ndarray:
    """(B, G, 1, d) rewards of the proposals under the module's rule (see the module doc)."""
    if duplicates not in DUPLICATE_RULES:
        raise ValueError(f"duplicates must be one of {', '.join(DUPLICATE_RULES)}, got {duplicates!r}")
    if failures not in FAILURE_RULES:
        raise ValueError(f"failures must be one of {', '.join(FAILURE_RULES)}, got {failures!r}")
    kinds, scores = proposals.kinds, proposals.scores
    b, g, d = scores.shape
    out = np.empty((b, g, d))
    for row in range(b):
        low, gap = floor(scores[row], proposals.fronts[row])
        failure = low - gap if failures == "floor" else np.zeros(d)
        out[row] = failure
        out[row, kinds[row] == VALID] = scores[row, kinds[row] == VALID]
        repeated = kinds[row] == DUPLICATE
        if duplicates == "penalty":
            out[row, repeated] = low - PENALTY * gap
        elif duplicates == "zero":
            out[row, repeated] = 0.0
        elif duplicates == "score":
            original = np.isfinite(scores[row]).all(axis=1) & repeated
            out[row, original] = scores[row, original]
    return out[:, :, None, :]


def shares(kinds: np.ndarray) -> dict[str, float]:
    """Each KIND's share of a step's proposals (the step record's "valid", "failed", ... figures)."""
    kinds = np.asarray(kinds).reshape(-1)
    return {name: float(np.mean(kinds == code)) if kinds.size else 0.0 for code, name in enumerate(KINDS)}


CAUSES = {  # why a step taught nothing -> what to do about it
    "failed": "the model's proposals all fail to evaluate: a model that can write this spec's program is needed "
              "(see the failures with evo show DIR --failures; warm the model up on programs like the spec's)",
    "unparsed": "the model's proposals do not parse as programs: a model that answers in the prompt's format is needed",
    "cut": "the model's proposals are all cut off by the token budget: raise max_new_tokens",
    "duplicate": "the model's proposals all repeat programs the run already has: raise the sampling temperature, "
                 "or use a model that proposes new programs",
    "flat": "every proposal of each prompt earned the same (zero advantage everywhere): nothing tells good proposals "
            "from bad; use proposals that differ in score (vpo_front: that improve on the front) or another estimator",
}


def step_cause(record: Mapping[str, float | None]) -> str:
    """The CAUSES key of a step that taught nothing ('' when it could teach), from its record's
    KINDS shares and mean |advantage| (a record without the shares: ''): with no valid proposal,
    the commonest way they failed; with zero advantage everywhere, the way most of them failed
    when most did, else "flat"."""
    share = {name: record.get(name) for name in KINDS}
    if any(not isinstance(value, (int, float)) for value in share.values()):
        return ""
    worst = max(("failed", "unparsed", "cut", "duplicate"), key=lambda name: float(share[name] or 0.0))
    if not share["valid"]:
        return worst
    advantage = record.get("advantage_abs")
    if not (isinstance(advantage, (int, float)) and advantage <= FLAT):
        return ""
    return worst if float(share[worst] or 0.0) >= 0.5 else "flat"


def idle_cause(records: Sequence[Mapping[str, float | None]], steps: int) -> str:
    """One line when each of the last `steps` records taught nothing ('' otherwise, and for
    steps 0): the cause most of them share (the latest on a tie) and what to do."""
    window = list(records)[-steps:] if steps else []
    causes = [step_cause(record) for record in window]
    if not window or len(window) < steps or not all(causes):
        return ""
    cause = max(reversed(causes), key=causes.count)
    return f"nothing to learn in the last {steps} training steps (to step {window[-1]['step']}): {CAUSES[cause]}"
