"""Set prompts: one policy call asked for m programs, each written after the previous ones,
and the reply split back into its m programs.

`widen(prompt, m, ...)` turns a one-answer prompt (evo/prompts.py) into its set form:
- `full`, `versions`, `diff`: the closing instruction asks for m different programs, each
  under a heading line `### Program k` (k = 1..m) in the style's own reply form (a fenced
  program; for `diff`, SEARCH/REPLACE edits of the current program or a fenced program), and
  names the objectives the m programs should trade off differently;
- `continue`: the program's head is replaced by the spec's `[prompt] set_head` text with
  "{answers}" set to m (the task's own m-answer prompt, the one a set-trained checkpoint saw
  in training); without one, a comment line in the marker's syntax says that m versions of
  the block follow, separated by `separator` lines. The random prefix of the parent's block
  follows as in the one-answer form: the first program continues it, each later one starts
  after a separator. With the spec's `[prompt] answer_pattern` (a head spec: no prefix), the
  reply's programs are the pattern's matches wherever they stand (prose around them, several
  on one line), not the pieces between separators.

`programs(prompt, reply, cut)` gives exactly m entries, each the text of a candidate program
or the ParseFailure of that one program: a missing, malformed or cut-off program fails alone
(`cut`: the reply ran into its token budget, so the last program it holds is incomplete).
A heading splits a reply only where the prompt asked for one: a line that is a markdown
heading (`### Program k`, any level) or a bold one (`**Program k**`, `**Program k:** title`),
outside fenced code and numbered next (1, then 2, ...); a `# Program k` line, which is also a
Python comment, only when the reply's first heading is written so. Prose that names a
program ("Program 1 uses ...") and a program's own `# Program 1` comment, fenced or not (a
SEARCH/REPLACE edit is not fenced), stay in the program.

`answers_asked(text, most)` reads m back from the project's own closing instruction only (the
prompt's last paragraph, as `instruction` writes it), never from the programs a prompt shows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from evo.program import START, MarkerError, split
from evo.prompts import ANSWERS_FIELD, ParseFailure, Prompt, answers_matching, cut_at_stop, fence_for, fenced, fenced_blocks, parse

NEXT = "EVOLVE-BLOCK-NEXT"  # the default separator line of a `continue` set: the START marker's syntax, this word
# `### Program k` (then anything), or `**Program k**` (then nothing, or a title after a separator)
_HEADING = re.compile(r"[ \t]{0,3}(?:(#{1,6})[ \t]+(?:\*\*)?|\*\*)Program[ \t]+0*(\d{1,9})(.*)", re.IGNORECASE)
_BOLD_END = re.compile(r"[:.]\*\*.*|\*\*[ \t]*(?:[-:.(|\u2013\u2014].*)?")
_ASKED = re.compile(r"Reply with (\d{1,9}) different (?:improved programs|improved versions of the current program), one "
                    r"after the other: each under a heading line `### Program k` \(k = 1 to \1\), then .*", re.DOTALL)
_FENCE = re.compile(r"[ \t]*(`{3,})")


def _next_marker(base_code: str) -> str:
    """The NEXT marker in the syntax of the program's START line (`# EVOLVE-BLOCK-NEXT`)."""
    try:
        start_line = split(base_code).start_line
    except MarkerError:
        start_line = ""
    return start_line.replace(START, NEXT).strip() if start_line else f"# {NEXT}"


def separator_of(prompt: Prompt, given: str = "") -> str:
    """What separates the programs of a `continue` set reply: the spec's, else a marker line."""
    return given or f"\n{_next_marker(prompt.base.code)}\n"


def _trade_off(objectives: Sequence[str], minimize: Sequence[str]) -> str:
    if len(objectives) < 2:
        return "Make them differ in approach, not copies of one idea."
    named = ", ".join(f"{name} (lower is better)" if name in minimize else name for name in objectives)
    return f"Make them differ in how they trade the objectives off against each other ({named}), not copies of one idea."


def instruction(style: str, m: int, fence: str, objectives: Sequence[str] = (), minimize: Sequence[str] = ()) -> str:
    """The closing instruction of a chat-style set prompt (what `answers_asked` reads back)."""
    if style == "diff":
        form = ("SEARCH/REPLACE edits of the current program (or a whole program in one "
                f"{fence}python block)")
        what = "improved versions of the current program"
    else:
        form = f"one complete program in its own {fence}python block"
        what = "improved programs"
    return (f"Reply with {m} different {what}, one after the other: each under a heading line `### Program k` "
            f"(k = 1 to {m}), then {form}. {_trade_off(objectives, minimize)}")


def answers_asked(text: str, most: int) -> int:
    """How many programs a chat-style prompt asks for, at most `most`: the m of its closing
    instruction (its last paragraph, as `instruction` writes it); 1 for a one-answer prompt."""
    found = _ASKED.fullmatch(text.rstrip("\n").rpartition("\n\n")[2])
    return min(int(found.group(1)), most) if found else 1


def widen(prompt: Prompt, m: int, *, objectives: Sequence[str] = (), minimize: Sequence[str] = (),
          set_head: str = "", separator: str = "") -> Prompt:
    """The set form of a one-answer `prompt`, asking for `m` programs (m = 1: `prompt` itself)."""
    if m == 1:
        return prompt
    if prompt.style == "continue":
        sep = separator_of(prompt, separator)
        if set_head:
            head = set_head.replace(ANSWERS_FIELD, str(m))
        else:
            head = (split(prompt.base.code).head + f"{_next_marker(prompt.base.code)}: {m} different versions of "
                    f"the block follow, each after a {sep.strip()!r} line\n")
        return replace(prompt, text=head + prompt.prefix, answers=m, separator=sep)
    closing = instruction(prompt.style, m, fence_for(prompt.base.code), objectives, minimize)
    body, _, _ = prompt.text.rstrip("\n").rpartition("\n\n")
    return replace(prompt, text=f"{body}\n\n{closing}\n", answers=m)


def _heading(line: str) -> tuple[str, int] | None:
    """(its form: the `#`s or "**", k) of a `Program k` heading line, else None."""
    found = _HEADING.fullmatch(line)
    if found is None:
        return None
    hashes, k, rest = found.groups()
    if hashes and rest.startswith("**"):
        rest = rest[2:]
    if rest[:1].isalnum() or rest[:1] == "_" or (not hashes and not _BOLD_END.fullmatch(rest)):
        return None  # `Program 12a`, `**Program 1** uses ...`: not a heading
    return hashes or "**", int(k)


def sections(reply: str) -> list[str]:
    """The reply's parts under `Program k` headings outside fenced code, in order ([] without
    headings): a heading counts when it is numbered next; one written like a comment
    (`# Program k`) only when the reply's first heading was written so."""
    parts: list[list[str]] = []
    first = ""  # the first heading's form: its `#`s or "**"
    fence = 0  # the backticks of the open fence, 0 outside code
    for line in reply.split("\n"):
        opening = _FENCE.match(line)
        heading = _heading(line) if fence == 0 else None
        if heading is not None and heading[1] == len(parts) + 1 and (heading[0] != "#" or first in ("", "#")):
            first = first or heading[0]
            parts.append([])
            continue
        if opening:
            ticks = len(opening.group(1))
            if fence == 0:
                fence = ticks
            elif ticks >= fence and not line.strip().strip("`"):
                fence = 0
        if parts:
            parts[-1].append(line)
    return ["\n".join(part) for part in parts]


def _fenced_parts(reply: str) -> list[str]:
    """Without headings: each fenced block is one program, in order."""
    return [fenced(body) for lang, body in fenced_blocks(reply) if lang in ("python", "py", "python3", "")]


def _texts(prompt: Prompt, reply: str) -> list[str]:
    """The reply's answer texts in order, as the one-answer parser of the style reads them."""
    if prompt.style == "continue" and prompt.pattern:  # a head spec's answers, wherever the reply puts them
        return answers_matching(prompt.pattern, cut_at_stop(reply, prompt.stop))
    if prompt.style == "continue":
        pieces = cut_at_stop(reply, prompt.stop).split(prompt.separator)
        if not prompt.prefix and not prompt.separator.strip():  # whole programs a line: blank lines hold none
            pieces = [piece for piece in pieces if piece.strip()]
        return [prompt.prefix + pieces[0], *pieces[1:]] if pieces else []
    found = sections(reply)
    if found or prompt.style == "diff":
        return found or [reply]
    return _fenced_parts(reply)


def _one(prompt: Prompt, text: str) -> str:
    if prompt.style == "continue":
        if not text.strip():
            raise ParseFailure("the program is empty")
        try:
            return split(prompt.base.code).with_block(text).text
        except MarkerError as error:
            raise ParseFailure(f"markers: {error}") from None
    return parse(prompt, text)


def programs(prompt: Prompt, reply: str, cut: bool = False) -> list[str | ParseFailure]:
    """The `prompt.answers` programs of a set reply, each a program text or its own ParseFailure."""
    m = prompt.answers
    texts = _texts(prompt, reply)
    single = replace(prompt, answers=1)
    out: list[str | ParseFailure] = []
    for k in range(m):
        if k >= len(texts):
            out.append(ParseFailure(f"the reply holds {len(texts)} of the {m} programs asked for; program {k + 1} is missing"))
        elif cut and k == len(texts) - 1 and not prompt.pattern:  # a match is whole: the cut tail matched nothing
            out.append(ParseFailure(f"program {k + 1} of {m} was cut off at the token budget"))
        else:
            try:
                out.append(_one(single, texts[k]))
            except ParseFailure as failure:
                out.append(ParseFailure(f"program {k + 1} of {m}: {failure}"))
    return out
