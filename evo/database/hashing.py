"""Program identity: an exact hash and a whitespace-normalized hash for duplicate rejection."""

from __future__ import annotations

import hashlib
import re

_RUNS = re.compile(r"[ \t]+")


def normalize(code: str) -> str:
    """Code with whitespace that cannot change a Python program's meaning removed.

    Tabs are expanded, trailing whitespace and blank lines dropped, and runs of spaces after
    the indentation collapsed to one; indentation itself is kept (it is syntax). Runs inside
    string literals are collapsed too — two programs that differ only there count as one.
    """
    lines = []
    for line in code.expandtabs(4).splitlines():
        body = line.lstrip(" ")
        if body.strip():
            lines.append(line[: len(line) - len(body)] + _RUNS.sub(" ", body.rstrip()))
    return "\n".join(lines)


def exact_hash(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()


def normalized_hash(code: str) -> str:
    return exact_hash(normalize(code))
