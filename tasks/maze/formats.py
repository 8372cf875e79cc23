"""Prompt formats and strict parsers.

`compact` (for character-level tiny models) writes a route as the visited cells, two
characters per cell (row letter, column digit), starting on S; the m routes of one
completion are separated by `|`. The last prompt line repeats the start and exit cells:

     0123456
    a#......
    ...
    routes 3 moves 14 a6>g0
    a6b6b5...|a6a5...|a6b6...

The prompt has a fixed length for a given grid size. `chat` (for instruction-tuned models)
is natural language with `<route_i>` tags around U/D/L/R moves.
"""

from __future__ import annotations

import re

from tasks.base import ParseError, TemplateMismatch
from tasks.maze.env import Cell, Maze

SEPARATOR = "|"
ROW_LABELS = "abcdefghij"
_CELLS = re.compile(r"(?:[a-j][0-9])+")


def cell_name(cell: Cell) -> str:
    return f"{ROW_LABELS[cell[0]]}{cell[1]}"


def compact_prompt(maze: Maze, m: int) -> str:
    header = " " + "".join(str(c) for c in range(maze.size))
    rows = [ROW_LABELS[r] + row for r, row in enumerate(maze.rows)]
    ends = f"{cell_name(maze.start)}>{cell_name(maze.exit)}"
    return "\n".join([header, *rows, f"routes {m} moves {maze.budget:02d} {ends}"]) + "\n"


def compact_answer(paths: list[tuple[Cell, ...]]) -> str:
    return SEPARATOR.join("".join(cell_name(cell) for cell in path) for path in paths)


def parse_compact(maze: Maze, completion: str, m: int) -> list[tuple[Cell, ...]]:
    """The routes as cell tuples; ParseError if malformed, TemplateMismatch if not m routes."""
    text = completion.strip()
    if not text:
        raise ParseError("empty completion")
    parts = text.split(SEPARATOR)
    if len(parts) != m:
        raise TemplateMismatch(f"expected {m} route(s), found {len(parts)}")
    routes = []
    for part in parts:
        if not _CELLS.fullmatch(part):
            raise ParseError(f"malformed route {part[:40]!r}: expected cells like a0b0b1")
        cells = tuple((ROW_LABELS.index(part[i]), int(part[i + 1])) for i in range(0, len(part), 2))
        if any(max(cell) >= maze.size for cell in cells):
            raise ParseError(f"route {part[:40]!r} leaves the {maze.size}x{maze.size} grid")
        routes.append(cells)
    return routes


CHAT_TEMPLATE = """You are in a {n}x{n} grid maze. Legend: S start, E exit, G gold, D diamond, \
L lava, # wall, . floor. Row 1 is the top row.

{grid}

Walk from S to E in at most {budget} moves. A move is U (up), D (down), L (left) or R \
(right); a move into a wall or the border wastes the move; the route ends when you step \
on E. Reaching E is required for any reward. Then you are rewarded for the fraction of \
gold tiles and of diamond tiles you walked over and for avoiding lava tiles. The budget \
does not allow collecting both gold and diamonds.

Give {m} different route(s), each on its own line inside tags, moves separated by spaces:
{example}"""

_TAG = re.compile(r"<route_(\d+)>(.*?)</route_\1>", re.DOTALL)
_MOVE_WORDS = {"U": "U", "D": "D", "L": "L", "R": "R", "UP": "U", "DOWN": "D", "LEFT": "L", "RIGHT": "R"}


def chat_prompt(maze: Maze, m: int) -> str:
    example = "\n".join(f"<route_{i}>R D ...</route_{i}>" for i in range(1, m + 1))
    return CHAT_TEMPLATE.format(n=maze.size, grid="\n".join(maze.rows), budget=maze.budget, m=m, example=example)


def chat_answer(moves: list[str]) -> str:
    return "\n".join(f"<route_{i}>{' '.join(route)}</route_{i}>" for i, route in enumerate(moves, 1))


def parse_chat(completion: str, m: int) -> list[str]:
    """The routes as U/D/L/R strings; ParseError if malformed, TemplateMismatch if not m routes."""
    found = _TAG.findall(completion)
    if not found:
        raise ParseError("no <route_i>...</route_i> tags")
    if [int(i) for i, _ in found] != list(range(1, len(found) + 1)):
        raise ParseError(f"route tags are numbered {[int(i) for i, _ in found]}, expected 1..{len(found)}")
    if len(found) != m:
        raise TemplateMismatch(f"expected {m} route(s), found {len(found)}")
    routes = []
    for _, body in found:
        words = body.replace(",", " ").upper().split()
        if any(word not in _MOVE_WORDS for word in words):
            raise ParseError(f"route {body.strip()[:40]!r} has words other than U, D, L, R")
        routes.append("".join(_MOVE_WORDS[word] for word in words))
    return routes
