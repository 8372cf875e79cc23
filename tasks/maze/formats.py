"""Prompt formats and strict parsers.

`compact` (for character-level tiny models) writes a route as the visited cells, two
characters per cell (row letter, column digit), starting on S, each later cell preceded
by the move that reaches it (U/D/L/R: the one real decision per step, after which the
cell is a deterministic copy). The m routes of one completion are separated by `|`. The
last prompt line gives the number of routes, the move budget and the start and exit cells:

     0123456
    a#......
    ...
    routes 3 moves 14 a6>g0
    a6Db6La5...|a6La5...|a6Db6...

With `notes` (the `maze-notes` task) the prompt also lists every cell by name with its
note, one letter naming which of its four moves stay on open cells (`NOTES`), and a route
writes each cell's note after it (`a6qDb6xLa5y...`). Writing a note is then a copy by name
(an induction-head lookup), and the next move only has to agree with the letter just
written; a tiny model learns that far faster than finding a neighbour's tile at a 2-D
offset in the grid (its warm-up reaches the exit in 79% of its routes instead of 26%;
docs/tasks.md). Notes are a scratchpad: the parser accepts routes with or without them and
ignores them. It also takes plain cells (`a6b6a5`); a move letter that does not match its
step makes that route invalid (it scores zeros), like a jump or a step into a wall.

The prompt has a fixed length for a given grid size. `chat` (for instruction-tuned models)
is natural language with `<route_i>` tags around U/D/L/R moves.
"""

from __future__ import annotations

import re

from tasks.base import ParseError, TemplateMismatch
from tasks.maze.env import MOVES, OBJECTIVES, Cell, Maze

SEPARATOR = "|"
ROW_LABELS = "abcdefghij"
NOTES = "klmnopqrstuvwxyz"  # a cell's open moves as one letter: index = U + 2 D + 4 L + 8 R
_ROUTE = re.compile(r"[a-j][0-9][k-z]?(?:[UDLR]?[a-j][0-9][k-z]?)*")
_STEP = re.compile(r"([UDLR]?)([a-j])([0-9])[k-z]?")
INVALID: Cell = (-1, -1)  # stands for a step whose move letter contradicts its cells


def cell_name(cell: Cell) -> str:
    return f"{ROW_LABELS[cell[0]]}{cell[1]}"


def note(maze: Maze, cell: Cell) -> str:
    """The letter naming `cell`'s open moves (`#` for a wall)."""
    if not maze.is_open(cell):
        return "#"
    r, c = cell
    return NOTES[sum(1 << i for i, (dr, dc) in enumerate(MOVES.values()) if maze.is_open((r + dr, c + dc)))]


COMPACT_GOAL_UNITS = 9  # a compact prompt writes a weighting in ninths, one digit per objective
CHAT_GOAL_UNITS = 100  # a chat prompt writes it in whole percents


def units(weights, total: int) -> list[int]:
    """A weighting on the simplex as whole units of 1/total that sum to `total`: every entry
    rounds down, then the largest remainders (the first on ties) round up."""
    raw = [float(w) * total for w in weights]
    floors = [int(v // 1) for v in raw]
    order = sorted(range(len(raw)), key=lambda i: floors[i] - raw[i])  # largest remainder first, stable
    for i in order[: total - sum(floors)]:
        floors[i] += 1
    return floors


def compact_prompt(maze: Maze, m: int, notes: bool = False, goal: list[int] | None = None) -> str:
    """With `goal` (a weighting in ninths, `units(w, 9)`) its digits replace the first column
    labels of the header (` 0123456` -> ` 2412456`): the prompt keeps its length, so a tiny
    model with absolute positions trained on plain prompts still reads the grid."""
    labels = "".join(str(c) for c in range(maze.size))
    header = " " + (labels if goal is None else "".join(str(u) for u in goal) + labels[len(goal):])
    rows = [ROW_LABELS[r] + row for r, row in enumerate(maze.rows)]
    listing = [
        "".join(cell_name((r, c)) + note(maze, (r, c)) for c in range(maze.size)) for r in range(maze.size)
    ] if notes else []
    ends = f"{cell_name(maze.start)}>{cell_name(maze.exit)}"
    return "\n".join([header, *rows, *listing, f"routes {m} moves {maze.budget:02d} {ends}"]) + "\n"


def compact_route(maze: Maze, path: tuple[Cell, ...], notes: bool = False) -> str:
    """A path of adjacent cells as `a6Db6La5...`, with notes `a6qDb6xLa5y...` (move, cell, note)."""
    def name(cell: Cell) -> str:
        return cell_name(cell) + (note(maze, cell) if notes else "")

    return name(path[0]) + "".join(_move(a, b) + name(b) for a, b in zip(path, path[1:]))


def compact_answer(maze: Maze, paths: list[tuple[Cell, ...]], notes: bool = False) -> str:
    return SEPARATOR.join(compact_route(maze, path, notes) for path in paths)


def _move(a: Cell, b: Cell) -> str:
    return {(-1, 0): "U", (1, 0): "D", (0, -1): "L", (0, 1): "R"}.get((b[0] - a[0], b[1] - a[1]), "?")


def _cells(part: str) -> tuple[Cell, ...]:
    cells: list[Cell] = []
    for move, row, col in _STEP.findall(part):
        cell = (ROW_LABELS.index(row), int(col))
        cells.append(INVALID if move and cells and _move(cells[-1], cell) != move else cell)
    return tuple(cells)


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
        if not _ROUTE.fullmatch(part):
            raise ParseError(f"malformed route {part[:40]!r}: expected cells like a0Rb0Db1")
        cells = _cells(part)
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

Give {m} different route(s), one per line, each inside its own numbered tags <route_k>...</route_k> (k = 1 for the first route, 2 for the next, ...), moves separated by spaces, for example:
<route_1>R D ...</route_1>"""

ROUTE_TAG = r"<route_(\d+)>(.*?)</route_\1>"  # one route of a chat reply (a chat spec's [prompt] answer_pattern)
_TAG = re.compile(ROUTE_TAG, re.DOTALL)
_MOVE_WORDS = {"U": "U", "D": "D", "L": "L", "R": "R", "UP": "U", "DOWN": "D", "LEFT": "L", "RIGHT": "R"}


CHAT_GOAL = "This time a route's reward is {terms}.\n\n"


def chat_prompt(maze: Maze, m: int | str, goal: list[int] | None = None) -> str:
    """The prompt for m routes; m is written once, so the m-route prompts differ only there (a
    spec's [prompt] head is this text with m = "{answers}"). With `goal` (a weighting in whole
    percents, `units(w, 100)`) a sentence before the request says it."""
    text = CHAT_TEMPLATE.format(n=maze.size, grid="\n".join(maze.rows), budget=maze.budget, m=m)
    if goal is None:
        return text
    terms = " + ".join(f"{p}% {name}" for p, name in zip(goal, OBJECTIVES))
    cut = text.index("Give ")
    return text[:cut] + CHAT_GOAL.format(terms=terms) + text[cut:]


def chat_answer(moves: list[str]) -> str:
    return "\n".join(f"<route_{i}>{' '.join(route)}</route_{i}>" for i, route in enumerate(moves, 1))


def route_tags(completion: str) -> list[tuple[str, str]]:
    """(number, body) of each `<route_i>...</route_i>` in order."""
    return _TAG.findall(completion)


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
