"""Why children fail, and what the front holds, from a run's stored programs: pure
functions over evo/database/records.py, shared by `evo show` and `evo report`.

A failure message is grouped with the others of its kind that differ only in numbers
(line numbers, sizes, times), directories and temporary file names, so "IndexError ... (at
candidate.py:12)" and "(... :14)" count as one, and so do an evaluator's timeouts of
"/tmp/tmpk2x_9a0q/run.py" and "/tmp/tmp81bzq3wd/run.py"; each group keeps its first
program as the example. Everything shown is
bounded and escaped (evo.feedback.clean): a scorer or a candidate wrote it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np

from evo.database.records import Program
from evo.feedback import clean, head, tail
from evo.scores import real_values

MESSAGE_CHARS = 300
OUTPUT_CHARS = 400
OUTPUT_LINES = 4
_NUMBER = re.compile(r"\d+(\.\d+)?")
_DIRECTORY = re.compile(r"(?<![\w.])(?:[\\/][\w.~+@-]*)+[\\/]")  # an absolute path's folders (a sandbox's, a temp one)
_TEMP_NAME = re.compile(r"\btmp[a-z0-9_]{8}\b")  # Python's tempfile names: tmp + 8 random characters


def message_key(kind: str, message: str) -> tuple[str, str]:
    """The group a failure belongs to: its kind and its message with absolute paths' folders,
    temporary file names and numbers masked (a path's file name stays: it tells failures apart)."""
    masked = _TEMP_NAME.sub("TMP", _DIRECTORY.sub("DIR/", " ".join(message.split())))
    return kind, _NUMBER.sub("N", masked)


def common(programs: Iterable[Program], top: int = 10) -> list[dict]:
    """The `top` most common failure messages of the evaluated (not copied) programs:
    [{"kind", "message", "count", "example", "output"}], most common first (then the
    earliest); `example` is the first program's id, `output` the tail of its captured output."""
    groups: dict[tuple[str, str], list[Program]] = {}
    for p in sorted(programs, key=lambda p: p.id):
        if not p.ok and not p.is_copy:
            groups.setdefault(message_key(p.failure_kind or "", p.failure_message or ""), []).append(p)
    ranked = sorted(groups.values(), key=lambda group: (-len(group), group[0].id))[:top]
    return [{"kind": clean(group[0].failure_kind or "")[:40],
             "message": clean(head(" ".join((group[0].failure_message or "").split()), MESSAGE_CHARS)),
             "count": len(group), "example": group[0].id,
             "output": clean(tail(group[0].feedback, OUTPUT_CHARS, OUTPUT_LINES)) if group[0].feedback.strip() else ""}
            for group in ranked]


def distinct_front(front: Sequence[Program], objectives: Sequence[str], minimize: Sequence[str] = ()) -> list[dict]:
    """The Pareto front as distinct score vectors: [{"id" (the first program with it),
    "count", "ids" (the first ten), "scalar", "scores" (real values: `minimize`d ones
    un-negated)}], in the order of their first program."""
    groups: dict[bytes, list[Program]] = {}
    for p in sorted(front, key=lambda p: p.id):
        groups.setdefault(np.asarray(p.vector, dtype=np.float64).tobytes(), []).append(p)
    return [{"id": group[0].id, "count": len(group), "ids": [p.id for p in group[:10]], "scalar": group[0].scalar,
             "scores": real_values(group[0].vector, objectives, minimize)} for group in groups.values()]


def common_unparsed(rows: Iterable[tuple[int, str]], top: int = 10) -> list[dict]:
    """The `top` most common reasons replies were unparseable or cut off, from (iteration,
    message) rows: [{"message", "count", "iteration" (the first's)}], most common first."""
    groups: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for row in rows:
        groups.setdefault(message_key("unparseable", row[1]), []).append(row)
    ranked = sorted(groups.values(), key=lambda group: (-len(group), group[0][0]))[:top]
    return [{"message": clean(head(" ".join(group[0][1].split()), MESSAGE_CHARS)), "count": len(group),
             "iteration": group[0][0]} for group in ranked]


def mostly_unparseable(unparseable: int, proposed: int, messages: list[dict], directory) -> str | None:
    """The warning when more than half of the proposals were unparseable (None otherwise)."""
    if proposed == 0 or unparseable * 2 <= proposed:
        return None
    reason = f" (most often: {messages[0]['message']})" if messages else ""
    return (f"warning: {unparseable} of {proposed} proposals were unparseable{reason}; the policy does not answer in "
            f"the spec's format: evo show {directory} --failures")
