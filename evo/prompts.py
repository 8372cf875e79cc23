"""Prompt styles and their response parsers.

Styles:
- `full`: show the parent(s) and inspirations with their scores as fenced python; ask for
  the whole new program. Each shown program may carry what the evaluator said about it
  (its scorer's feedback, its recent failed children), bounded and escaped by evo/feedback.py;
  `diff` and `versions` show the same notes, `continue` none.
- `diff`: same context; ask for SEARCH/REPLACE blocks, applied strictly to the EVOLVE block.
- `versions` (FunSearch): the shown programs as version 0, 1, ... ordered by score; ask for
  the next version.
- `continue` (tiny models): the prompt is the file text before the EVOLVE-BLOCK-START line
  plus a random prefix of the block; the candidate is the file with block = prefix + the
  completion cut at the stop strings.

The primary parent is always the LAST fenced python block of a chat-style prompt (the
`mutate:` policy relies on it). Every parser also accepts a reply holding a whole fenced
program. A reply that cannot be turned into a program raises `ParseFailure`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from evo.feedback import notes
from evo.program import END, EvolveFile, MarkerError, split

STYLES = ("full", "diff", "versions", "continue")


class ParseFailure(ValueError):
    """A policy reply that does not yield a candidate program."""


@dataclass(frozen=True)
class Shown:
    """A program shown in a prompt, with its scores. `key` is opaque (the database id)."""

    code: str
    scalar: float
    scores: Mapping[str, float] = field(default_factory=dict)
    key: object = None
    feedback: str = ""  # the scorer's feedback text on it
    failed: tuple[tuple[str, str, str], ...] = ()  # (kind, message, output) of its recent failed children


@dataclass(frozen=True)
class Prompt:
    text: str
    style: str
    base: Shown  # the program the reply edits (diff base, splice target)
    prefix: str = ""  # `continue`: the block prefix given to the policy
    stop: tuple[str, ...] = ()


def _score_line(shown: Shown) -> str:
    parts = ", ".join(f"{name}={value:.4g}" for name, value in shown.scores.items())
    return f"score {shown.scalar:.4g}" + (f" ({parts})" if parts else "")


def _fenced(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def _shown_section(title: str, shown: Shown, label: str) -> str:
    """A program's heading, its fenced code and what the evaluator said about it."""
    said = notes(label, shown.feedback, shown.failed)
    return f"{title}\n{_fenced(shown.code)}" + (f"\n\n{said}" if said else "")


def _objectives_line(objectives: Sequence[str]) -> str:
    if not objectives:
        return ""
    return f"Objectives (higher is better): {', '.join(objectives)}; the score is their weighted mean.\n"


def _scope_line(base: Shown) -> str:
    try:
        marked = split(base.code).has_markers
    except MarkerError:
        marked = False
    if marked:
        return "Change only the code between the EVOLVE-BLOCK-START and EVOLVE-BLOCK-END lines."
    return "You may change any part of the program."


_DIFF_HELP = """Reply with one or more edits in exactly this form (SEARCH text must match the
current program exactly, including indentation, and occur once):
<<<<<<< SEARCH
lines to find
=======
lines to put instead
>>>>>>> REPLACE
"""


def _context_prompt(style: str, parents: Sequence[Shown], inspirations: Sequence[Shown],
                    system: str, objectives: Sequence[str]) -> Prompt:
    base = parents[0]
    sections = [system.strip(), _objectives_line(objectives) + _scope_line(base)]
    if style == "diff":
        sections.append(_DIFF_HELP)
    for index, shown in enumerate(inspirations):
        sections.append(_shown_section(f"## Inspiration {index + 1} ({_score_line(shown)})", shown,
                                       f"inspiration {index + 1}"))
    for index, shown in enumerate(parents[1:]):
        sections.append(_shown_section(f"## Other parent {index + 1} ({_score_line(shown)})", shown,
                                       f"other parent {index + 1}"))
    sections.append(_shown_section(f"## Current program ({_score_line(base)})", base, "the current program"))
    if style == "diff":
        sections.append("Reply with SEARCH/REPLACE edits that improve the current program.")
    else:
        sections.append("Reply with the complete improved program in one ```python block.")
    return Prompt("\n\n".join(s for s in sections if s) + "\n", style, base)


def _versions_prompt(programs: Sequence[Shown], system: str, objectives: Sequence[str]) -> Prompt:
    ordered = sorted(programs, key=lambda shown: shown.scalar)
    base = ordered[-1]
    sections = [system.strip(), _objectives_line(objectives) + _scope_line(base)]
    for version, shown in enumerate(ordered):
        sections.append(_shown_section(f"## Version {version} ({_score_line(shown)})", shown, f"version {version}"))
    sections.append(
        f"Write version {len(ordered)}, better than version {len(ordered) - 1}, "
        "as a complete program in one ```python block."
    )
    return Prompt("\n\n".join(s for s in sections if s) + "\n", "versions", base)


def _continue_prompt(base: Shown, rng: np.random.Generator, stop: Sequence[str]) -> Prompt:
    program = split(base.code)
    cut = int(rng.integers(0, len(program.block) + 1))
    prefix = program.block[:cut]
    stops = tuple(dict.fromkeys((END, *stop))) if program.has_markers else tuple(stop)
    return Prompt(program.head + prefix, "continue", base, prefix=prefix, stop=stops)


def build(style: str, parents: Sequence[Shown], inspirations: Sequence[Shown] = (), *,
          rng: np.random.Generator, system: str = "You improve programs.",
          objectives: Sequence[str] = (), stop: Sequence[str] = ()) -> Prompt:
    """The prompt for one policy call. `parents[0]` is the primary parent."""
    if not parents:
        raise ValueError("a prompt needs at least one parent")
    if style in ("full", "diff"):
        return _context_prompt(style, parents, inspirations, system, objectives)
    if style == "versions":
        return _versions_prompt([*parents, *inspirations], system, objectives)
    if style == "continue":
        return _continue_prompt(parents[0], rng, stop)
    raise ValueError(f"unknown prompt style {style!r}; expected one of {', '.join(STYLES)}")


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def fenced_code(reply: str) -> str | None:
    """The code of the last fenced block labelled python (or unlabelled), if any."""
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(reply)]
    chosen = [body for lang, body in blocks if lang in ("python", "py", "python3", "")]
    return chosen[-1] if chosen else None


def _splice_reply(base: Shown, code: str) -> str:
    """Put a fenced reply into the base file: a reply with markers gives its block; a reply
    without markers is the new block (or the whole file when the base has no markers)."""
    try:
        reply = split(code)
        program = split(base.code)
    except MarkerError as error:
        raise ParseFailure(f"reply markers: {error}") from None
    new_block = reply.block if reply.has_markers else code
    if not new_block.strip():
        raise ParseFailure("the reply's program is empty")
    return program.with_block(new_block).text


_EDIT = re.compile(
    r"<{5,}\s*SEARCH[ \t]*\n(.*?)\n?={5,}[ \t]*\n(.*?)\n?>{5,}\s*REPLACE", re.DOTALL
)


def apply_edits(block: str, edits: Sequence[tuple[str, str]]) -> str:
    """Apply SEARCH/REPLACE edits in order; each SEARCH must occur exactly once."""
    for search, replace in edits:
        if not search.strip():
            raise ParseFailure("an edit has an empty SEARCH section")
        count = block.count(search)
        if count != 1:
            where = "not found" if count == 0 else f"found {count} times"
            raise ParseFailure(f"SEARCH text {where} in the EVOLVE block: {search.strip()[:60]!r}")
        block = block.replace(search, replace, 1)
    return block


def _parse_diff(prompt: Prompt, reply: str) -> str:
    edits = _EDIT.findall(reply)
    if not edits:
        code = fenced_code(reply)
        if code is None:
            raise ParseFailure("no SEARCH/REPLACE edit and no fenced program in the reply")
        return _splice_reply(prompt.base, code)
    program = split(prompt.base.code)
    return program.with_block(apply_edits(program.block, edits)).text


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """`text` up to the first stop string; a marker stop also drops its partial line."""
    cut = min((text.find(s) for s in stop if s and s in text), default=-1)
    if cut < 0:
        return text
    head = text[:cut]
    if any(text.startswith(marker, cut) for marker in (END,)):
        head = head[: head.rfind("\n") + 1]
    return head


def _parse_continue(prompt: Prompt, reply: str) -> str:
    if reply.lstrip().startswith("```"):
        code = fenced_code(reply)
        if code is not None:
            return _splice_reply(prompt.base, code)
    program: EvolveFile = split(prompt.base.code)
    block = prompt.prefix + cut_at_stop(reply, prompt.stop)
    if not block.strip():
        raise ParseFailure("the continuation is empty")
    return program.with_block(block).text


def parse(prompt: Prompt, reply: str) -> str:
    """The candidate program for a policy reply to `prompt`; raises ParseFailure."""
    if prompt.style == "continue":
        return _parse_continue(prompt, reply)
    if prompt.style == "diff":
        return _parse_diff(prompt, reply)
    code = fenced_code(reply)
    if code is None:
        raise ParseFailure("no fenced ```python program in the reply")
    return _splice_reply(prompt.base, code)
