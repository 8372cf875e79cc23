"""Safe expressions over x0..xk: a whitelisted AST evaluated with numpy, and random ones.

Allowed: numbers, x0..x{k-1}, pi, e, + - * / **, unary -, sin cos exp log sqrt.
Integer literals become floats, so `2**10**10` overflows instead of hanging.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

import numpy as np

from tasks.base import ParseError

FUNCTIONS = {"sin": np.sin, "cos": np.cos, "exp": np.exp, "log": np.log, "sqrt": np.sqrt}
CONSTANTS = {"pi": np.pi, "e": np.e}
_BINARY = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_UNARY = (ast.USub, ast.UAdd)
MAX_LENGTH = 400


class _Floats(ast.NodeTransformer):
    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        return ast.copy_location(ast.Constant(float(node.value)), node)


def _check(node: ast.AST, arity: int) -> None:
    names = {f"x{i}" for i in range(arity)} | set(CONSTANTS)
    for child in ast.walk(node):
        if isinstance(child, (ast.Expression, ast.Load)) or isinstance(child, _BINARY + _UNARY):
            continue
        if isinstance(child, ast.BinOp) and isinstance(child.op, _BINARY):
            continue
        if isinstance(child, ast.UnaryOp) and isinstance(child.op, _UNARY):
            continue
        if isinstance(child, ast.Constant) and type(child.value) in (int, float):
            continue
        if isinstance(child, ast.Name) and (child.id in names or child.id in FUNCTIONS):
            continue
        if (isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id in FUNCTIONS
                and len(child.args) == 1 and not child.keywords):
            continue
        raise ParseError(f"{ast.dump(child)[:50]} is not allowed in an expression over x0..x{arity - 1}")
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and child.id in FUNCTIONS:
            parent_ok = any(isinstance(c, ast.Call) and c.func is child for c in ast.walk(node))
            if not parent_ok:
                raise ParseError(f"{child.id} must be called")


def parse_expression(text: str, arity: int) -> ast.Expression:
    """The checked AST of an expression; ParseError when it is not a valid expression."""
    text = text.strip()
    if not text or len(text) > MAX_LENGTH:
        raise ParseError(f"expression must be 1..{MAX_LENGTH} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError) as error:
        raise ParseError(f"not an expression: {text[:40]!r} ({error.__class__.__name__})") from None
    _check(tree, arity)
    return tree


def canonical(tree: ast.Expression) -> str:
    return ast.dump(tree)


def compile_expression(text: str, arity: int) -> Callable[[np.ndarray], np.ndarray]:
    """A function X (n, arity) -> predictions (n,); non-finite where the expression breaks."""
    tree = ast.fix_missing_locations(_Floats().visit(parse_expression(text, arity)))
    code = compile(tree, "<expression>", "eval")

    def evaluate(X: np.ndarray) -> np.ndarray:
        scope = {**FUNCTIONS, **CONSTANTS, **{f"x{i}": X[:, i] for i in range(arity)}}
        try:
            with np.errstate(all="ignore"):
                value = eval(code, {"__builtins__": {}}, scope)  # noqa: S307 - whitelisted AST
        except (OverflowError, ZeroDivisionError, ValueError, FloatingPointError):
            return np.full(len(X), np.nan)
        return np.broadcast_to(np.asarray(value, dtype=np.float64), (len(X),)).copy()

    return evaluate


def random_expression(arity: int, rng: np.random.Generator, depth: int = 3) -> str:
    """A random expression from a small grammar (parenthesized, so it parses back)."""
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.75:
            return f"x{rng.integers(arity)}"
        return ("1", "2", "3", "0.5")[rng.integers(4)]
    kind = rng.random()
    if kind < 0.25:
        func = ("sin", "cos", "exp", "log", "sqrt")[rng.integers(5)]
        inner = random_expression(arity, rng, depth - 1)
        return f"{func}({inner} + 1)" if func in ("log", "sqrt") else f"{func}({inner})"
    op = ("+", "-", "*", "/", "**2")[rng.integers(5)]
    left = random_expression(arity, rng, depth - 1)
    if op == "**2":
        return f"({left})**2"
    return f"({left} {op} {random_expression(arity, rng, depth - 1)})"
