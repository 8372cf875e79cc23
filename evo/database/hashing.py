"""Program identity: an exact hash and the normalized hashes that reject duplicates.

Duplicate keys (`DEDUPE`, chosen per run by the program's language):
- `python`: the AST with docstrings dropped (so comments, formatting, quotes, parentheses
  and docstrings do not count); code that does not parse falls back to `whitespace`;
- `text`: every run of whitespace is one space, none at the ends;
- `whitespace`: `normalize` below (runs started before the other keys keep it).
"""

from __future__ import annotations

import ast
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


DEDUPE = ("python", "text", "whitespace")
_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")  # the fields that hold statements


def python_form(code: str) -> str | None:
    """The program's AST without docstrings, as text; None when it does not parse."""
    try:
        tree = ast.parse(code)
        statements: list[ast.AST] = [tree]
        while statements:  # statements only: a docstring is never inside an expression
            node = statements.pop()
            if isinstance(node, _DOCUMENTED) and node.body and _is_docstring(node.body[0]):
                node.body = node.body[1:] or [ast.Pass()]
            for name in _BODIES:
                statements.extend(getattr(node, name, ()))
        return ast.dump(tree)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and isinstance(
        statement.value.value, str)


def dedupe_hash(code: str, kind: str = "python") -> str:
    """The duplicate key of `code` under one of DEDUPE."""
    if kind == "python":
        form = python_form(code)
        return normalized_hash(code) if form is None else exact_hash("ast\n" + form)
    if kind == "text":
        return exact_hash(" ".join(code.split()))
    if kind == "whitespace":
        return normalized_hash(code)
    raise ValueError(f"unknown duplicate key {kind!r}; expected one of {', '.join(DEDUPE)}")
