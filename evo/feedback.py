"""What the evaluator said about a shown program, made safe to put in a prompt: the
scorer's feedback text and the failures of the program's children (kind, message, output
tail), each bounded, escaped and labelled as data.

Whatever a scorer or a candidate wrote, the rendered text has no control or
direction-changing characters (they become `\\xNN` / `\\uNNNN`), no run of three
backticks (so it never opens or closes a fenced block: the primary parent stays the last
one), and every line starts with "| " (so nothing in it reads as a section heading or an
edit marker of the prompt's own format).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from evo.scores import storable

FEEDBACK_CHARS = 1200  # of a scorer's feedback text shown per program
MESSAGE_CHARS = 300  # of a failed child's message
OUTPUT_CHARS = 600  # of a failed child's output (its tail)
OUTPUT_LINES = 8
FAILURES_SHOWN = 2  # a parent's most recent failed children shown with it

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]")
_FENCE = re.compile("`{3,}")


def _escape(char: re.Match) -> str:
    code = ord(char.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` safe to print to a terminal: control and invisible characters escaped (\\x1b...),
    surrogates replaced; tabs and line breaks kept."""
    return _UNSAFE.sub(_escape, storable(text))


def clean(text: str) -> str:
    """`text` with unsafe characters escaped, fences broken and surrogates replaced."""
    text = storable(text).replace("\r\n", "\n").replace("\t", "    ")
    return _FENCE.sub(lambda m: "'" * len(m.group()), _UNSAFE.sub(_escape, text))


def head(text: str, limit: int) -> str:
    """The first `limit` characters of `text`, saying how many were cut."""
    return text if len(text) <= limit else f"{text[:limit]} [... {len(text) - limit} more characters cut]"


def tail(text: str, limit: int, lines: int) -> str:
    """The last `lines` lines (at most `limit` characters) of `text`, saying what was cut."""
    kept = text.rstrip().splitlines()[-lines:]
    shown = "\n".join(kept)[-limit:]
    return shown if len(shown) >= len(text.rstrip()) else f"[... earlier output cut]\n{shown}"


def quoted(text: str) -> str:
    """Each line of the cleaned `text` behind '| '."""
    return "\n".join(f"| {line}" for line in clean(text).splitlines() or [""])


def notes(label: str, feedback: str, failed: Sequence[tuple[str, str, str]]) -> str:
    """The prompt section for one shown program ('' when there is nothing to say).
    `failed`: (kind, message, output) of its recent failed children, newest first."""
    parts = []
    if feedback.strip():
        parts.append(f"Evaluator feedback on {label} (the scorer's text, shown as data):\n"
                     f"{quoted(head(feedback.strip(), FEEDBACK_CHARS))}")
    for kind, message, output in failed[:FAILURES_SHOWN]:
        lines = [f"Previous attempt built on {label} failed ({clean(kind)[:40]}):",
                 quoted(head(" ".join(message.split()), MESSAGE_CHARS))]
        if output.strip():
            lines += ["Its output ended with:", quoted(tail(output, OUTPUT_CHARS, OUTPUT_LINES))]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)
