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
ANSWERS_FIELD = "{answers}"  # where a prompt head text puts the number of programs


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
    answers: int = 1  # programs asked for in one reply (evo/prompt_sets.py)
    separator: str = ""  # `continue` sets: what separates the programs of a reply
    pattern: str = ""  # `continue` with a head: a regular expression each answer of a reply matches (found anywhere)


def _score_line(shown: Shown, minimize: Sequence[str] = ()) -> str:
    """`score S (a=.., b=..)`: the scalar, then each objective as the scorer reported it; a
    lower-is-better one says so."""
    parts = ", ".join(f"{name}={value:.4g}" + (" [lower is better]" if name in minimize else "")
                      for name, value in shown.scores.items())
    return f"score {shown.scalar:.4g}" + (f" ({parts})" if parts else "")


_TICKS = re.compile("`+")


def fence_for(code: str) -> str:
    """A backtick fence longer than any run of backticks in `code` (at least three): the
    CommonMark rule, so a fence inside the program (a docstring's markdown) never closes it."""
    return "`" * max(3, 1 + max((len(run) for run in _TICKS.findall(code)), default=0))


def fenced(code: str, lang: str = "python") -> str:
    """`code` in a fenced block that nothing inside it can close."""
    fence = fence_for(code)
    return f"{fence}{lang}\n{code.rstrip()}\n{fence}"



def _shown_section(title: str, shown: Shown, label: str) -> str:
    """A program's heading, its fenced code and what the evaluator said about it."""
    said = notes(label, shown.feedback, shown.failed)
    return f"{title}\n{fenced(shown.code)}" + (f"\n\n{said}" if said else "")


def _objectives_line(objectives: Sequence[str], minimize: Sequence[str] = ()) -> str:
    if not objectives:
        return ""
    if not minimize:
        return f"Objectives (higher is better): {', '.join(objectives)}; the score is their weighted mean.\n"
    named = ", ".join(f"{name} ({'lower' if name in minimize else 'higher'} is better)" for name in objectives)
    return (f"Objectives: {named}. Each is shown as measured; the score (higher is better) is their weighted "
            f"mean with the lower-is-better ones counted negated.\n")


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
                    system: str, objectives: Sequence[str], minimize: Sequence[str]) -> Prompt:
    base = parents[0]
    sections = [system.strip(), _objectives_line(objectives, minimize) + _scope_line(base)]
    if style == "diff":
        sections.append(_DIFF_HELP)
    for index, shown in enumerate(inspirations):
        sections.append(_shown_section(f"## Inspiration {index + 1} ({_score_line(shown, minimize)})", shown,
                                       f"inspiration {index + 1}"))
    for index, shown in enumerate(parents[1:]):
        sections.append(_shown_section(f"## Other parent {index + 1} ({_score_line(shown, minimize)})", shown,
                                       f"other parent {index + 1}"))
    sections.append(_shown_section(f"## Current program ({_score_line(base, minimize)})", base, "the current program"))
    if style == "diff":
        sections.append("Reply with SEARCH/REPLACE edits that improve the current program.")
    else:
        sections.append(f"Reply with the complete improved program in one {fence_for(base.code)}python block.")
    return Prompt("\n\n".join(s for s in sections if s) + "\n", style, base)


def _versions_prompt(programs: Sequence[Shown], system: str, objectives: Sequence[str],
                     minimize: Sequence[str]) -> Prompt:
    ordered = sorted(programs, key=lambda shown: shown.scalar)
    base = ordered[-1]
    sections = [system.strip(), _objectives_line(objectives, minimize) + _scope_line(base)]
    for version, shown in enumerate(ordered):
        sections.append(_shown_section(f"## Version {version} ({_score_line(shown, minimize)})", shown,
                                       f"version {version}"))
    sections.append(
        f"Write version {len(ordered)}, better than version {len(ordered) - 1}, "
        f"as a complete program in one {fence_for(base.code)}python block."
    )
    return Prompt("\n\n".join(s for s in sections if s) + "\n", "versions", base)


def _continue_prompt(base: Shown, rng: np.random.Generator, stop: Sequence[str], head: str = "",
                     pattern: str = "") -> Prompt:
    """The program's head and a random prefix of its block; with a `head` text (the spec's
    [prompt] head, for a model that answers a prompt rather than continuing a file), that text
    for one program and no prefix: the reply is the whole block, or with a `pattern` (the spec's
    [prompt] answer_pattern) its first match."""
    program = split(base.code)
    stops = tuple(dict.fromkeys((END, *stop))) if program.has_markers else tuple(stop)
    if head:
        return Prompt(head.replace(ANSWERS_FIELD, "1"), "continue", base, prefix="", stop=stops, pattern=pattern)
    cut = int(rng.integers(0, len(program.block) + 1))
    prefix = program.block[:cut]
    return Prompt(program.head + prefix, "continue", base, prefix=prefix, stop=stops)


def build(style: str, parents: Sequence[Shown], inspirations: Sequence[Shown] = (), *,
          rng: np.random.Generator, system: str = "You improve programs.",
          objectives: Sequence[str] = (), minimize: Sequence[str] = (), stop: Sequence[str] = (),
          head: str = "", pattern: str = "") -> Prompt:
    """The prompt for one policy call. `parents[0]` is the primary parent. Shown scores are the
    scorer's real values; the objectives in `minimize` are labelled lower-is-better; `head`: a
    `continue` prompt's whole text ("{answers}" = 1), the spec's [prompt] head; `pattern` (with a
    head): what each answer of a reply matches, the spec's [prompt] answer_pattern."""
    if not parents:
        raise ValueError("a prompt needs at least one parent")
    if style in ("full", "diff"):
        return _context_prompt(style, parents, inspirations, system, objectives, minimize)
    if style == "versions":
        return _versions_prompt([*parents, *inspirations], system, objectives, minimize)
    if style == "continue":
        return _continue_prompt(parents[0], rng, stop, head, pattern)
    raise ValueError(f"unknown prompt style {style!r}; expected one of {', '.join(STYLES)}")


_OPENING = re.compile(r"[ \t]*(`{3,})([^`\n]*)")  # a fence line: 3+ backticks, an info string without backticks
_CLOSING = re.compile(r"[ \t]*(`{3,})[ \t]*")


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block, in one pass over the lines (CommonMark's rule: a
    block closes at a line of at least as many backticks as opened it, else at the end)."""
    lines = text.split("\n")
    blocks: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        opening = _OPENING.fullmatch(lines[i])
        i += 1
        if opening is None:
            continue
        ticks, info = len(opening.group(1)), opening.group(2).split()
        start = i
        while i < len(lines) and not ((close := _CLOSING.fullmatch(lines[i])) and len(close.group(1)) >= ticks):
            i += 1
        body = "\n".join(lines[start:i])
        blocks.append(((info[0] if info else "").lower(), body + "\n" if i < len(lines) and i > start else body))
        i += 1
    return blocks


def fenced_code(reply: str) -> str | None:
    """The code of the last fenced block labelled python (or unlabelled), if any."""
    chosen = [body for lang, body in fenced_blocks(reply) if lang in ("python", "py", "python3", "")]
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


_SEARCH = re.compile(r"[ \t]*<{5,}[ \t]*SEARCH[ \t]*")
_DIVIDER = re.compile(r"[ \t]*={5,}[ \t]*")
_REPLACE = re.compile(r"[ \t]*>{5,}[ \t]*REPLACE[ \t]*")


def edits_in(reply: str) -> list[tuple[str, str]]:
    """The (search, replace) texts of a reply's SEARCH/REPLACE blocks, in one pass over its
    lines (linear time, whatever the reply): a block is a `<<<<<<< SEARCH` line, the search
    lines, a `=======` line, the replacement lines and a `>>>>>>> REPLACE` line; a SEARCH line
    before its divider starts the block again, an unfinished block is ignored."""
    edits: list[tuple[str, str]] = []
    search: list[str] | None = None
    replace: list[str] | None = None
    for line in reply.split("\n"):
        if replace is not None:
            if _REPLACE.fullmatch(line):
                edits.append(("\n".join(search or ()), "\n".join(replace)))
                search = replace = None
            else:
                replace.append(line)
        elif _SEARCH.fullmatch(line):
            search = []
        elif search is not None:
            if _DIVIDER.fullmatch(line):
                replace = []
            else:
                search.append(line)
    return edits


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
    edits = edits_in(reply)
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
    if reply.lstrip().startswith("```") and not prompt.pattern:
        code = fenced_code(reply)
        if code is not None:
            return _splice_reply(prompt.base, code)
    program: EvolveFile = split(prompt.base.code)
    block = prompt.prefix + cut_at_stop(reply, prompt.stop)
    if prompt.pattern:
        found = answers_matching(prompt.pattern, block)
        if not found:
            raise ParseFailure(f"no answer matching [prompt] answer_pattern {prompt.pattern!r} in the reply")
        block = found[0]
    if not block.strip():
        raise ParseFailure("the continuation is empty")
    return program.with_block(block).text


def answers_matching(pattern: str, text: str) -> list[str]:
    """Each non-empty match of `pattern` in `text`, in order (`.` matches line breaks too)."""
    return [found.group(0) for found in re.finditer(pattern, text, re.DOTALL) if found.group(0).strip()]


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
