"""`mutate:` policy: random AST-level edits of the parent program, no model at all.

The parent is the LAST fenced ```python block in the prompt. Only the lines between
EVOLVE-BLOCK-START and EVOLVE-BLOCK-END change when those markers are present (otherwise the
whole program). Every completion is one fenced block holding the whole edited program, and
always parses as Python; a set prompt asking for m programs (evo/prompt_sets.py) gets m
independent edits, each under its `### Program k` heading. m is read from the prompt's
closing instruction only (`answers_asked`: never from a program the prompt shows), and is at
most SearchSettings.MAXIMUM["answers"].

The edits: move a numeric constant, swap an operator, delete a statement. An edit that
would put the same statement twice in one block is not made, nor a deletion of the only
assignment of a name the code still reads (a certain NameError). A parent whose editable code
has no constant and no operator gets one line on stderr (once per policy): its children
can only lose statements, so most of them repeat earlier ones.
"""

from __future__ import annotations

import ast
import copy
import random
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any
from dataclasses import dataclass

from evo.database.config import SearchSettings
from evo.errors import UserError
from evo.policies.base import Completion
from evo.policies.options import Range, check_config, check_sampling, parse_option
from evo.program import EvolveFile, MarkerError, split
from evo.prompt_sets import answers_asked
from evo.prompts import fence_for, fenced_code

SWAPS: dict[type, tuple[type, ...]] = {
    ast.Add: (ast.Sub, ast.Mult), ast.Sub: (ast.Add,), ast.Mult: (ast.Add, ast.Div, ast.FloorDiv),
    ast.Div: (ast.Mult, ast.FloorDiv), ast.FloorDiv: (ast.Div, ast.Mult), ast.Mod: (ast.FloorDiv,),
    ast.Pow: (ast.Mult,), ast.Lt: (ast.LtE, ast.Gt), ast.LtE: (ast.Lt, ast.GtE), ast.Gt: (ast.GtE, ast.Lt),
    ast.GtE: (ast.Gt, ast.LtE), ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,), ast.And: (ast.Or,), ast.Or: (ast.And,),
    ast.BitAnd: (ast.BitOr,), ast.BitOr: (ast.BitAnd, ast.BitXor), ast.BitXor: (ast.BitOr,),
}


# The options of a `mutate:` URI and their ranges (the one place they are written).
RANGES: dict[str, Range] = {"max_edits": Range(1, 100, integer=True), "scale": Range(0.0, 10.0)}


@dataclass(frozen=True)
class MutateConfig:
    max_edits: int = 3  # each completion applies 1..max_edits random edits
    scale: float = 0.5  # numeric constants move by a factor in [1 - scale, 1 + scale] (or +-1 for ints)

    def __post_init__(self) -> None:
        check_config("mutate", self, RANGES)


def parent_program(prompt: str) -> str | None:
    """The last fenced python block in the prompt, or None."""
    return fenced_code(prompt)


NOTHING_TO_VARY = ("mutate: the parent's EVOLVE block (or whole program, without markers) has no number and no "
                   "operator to change: mutate: can only delete its statements, so most proposals will be duplicates; "
                   "put the constants or operators to tune inside the block, or use a model policy")


def mutate_source(source: str, rng: random.Random, config: MutateConfig = MutateConfig()) -> str:
    """Apply 1..max_edits random edits to a Python source; returns the source unchanged if
    nothing can be edited (or it does not parse). No edit repeats a statement in its block."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    for _ in range(rng.randint(1, max(1, config.max_edits))):
        candidate = copy.deepcopy(tree)
        edits = [e for e in (_perturb_constant, _swap_operator, _delete_statement) if e(candidate, rng, config, dry=True)]
        if not edits:
            break
        rng.choice(edits)(candidate, rng, config, dry=False)
        if _repeats(candidate) > _repeats(tree) or not _compiles(ast.fix_missing_locations(candidate)):
            continue
        tree = candidate
    return ast.unparse(tree) + "\n"


def has_values(source: str) -> bool:
    """Whether `source` holds a numeric constant or an operator mutate: can change."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return bool(_constants(tree) or _operators(tree))


def _repeats(tree: ast.AST) -> int:
    """How many statements equal an earlier one of the same block."""
    return sum(len(body) - len({ast.dump(s) for s in body}) for body in _statement_lists(tree, 2))


def _compiles(tree: ast.Module) -> bool:
    """Whether the edited code compiles, as a module or as a function body (an EVOLVE block
    inside a function may `return`)."""
    function = ast.FunctionDef(name="_", args=ast.arguments([], [], None, [], [], None, []), body=tree.body,
                               decorator_list=[])
    for candidate in (tree, ast.Module([function], [])):
        try:
            compile(ast.fix_missing_locations(candidate), "<mutant>", "exec")
            return True
        except (SyntaxError, ValueError):
            pass
    return False


def editable(program: str) -> tuple[EvolveFile | None, str, str]:
    """What mutate: edits: (the program's parts, the EVOLVE block's indentation, the block
    dedented) when it has markers, else (None, "", the whole program)."""
    try:
        parts = split(program)
    except MarkerError:
        return None, "", program
    if not parts.has_markers:
        return None, "", program
    indent = _common_indent(parts.block)
    return parts, indent, _dedent(parts.block, indent)


def mutate_program(program: str, rng: random.Random, config: MutateConfig = MutateConfig()) -> str:
    """Edit only the EVOLVE block (keeping its indentation), or the whole program."""
    parts, indent, source = editable(program)
    if parts is None:
        return mutate_source(program, rng, config)
    edited = mutate_source(source, rng, config)
    reindented = "".join(indent + line if line.strip() else line for line in edited.splitlines(keepends=True))
    result = parts.with_block(reindented).text
    if _parses(program) and not _parses(result):  # (a block in a file that is not Python: the block's own check)
        return program
    return result


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


class MutatePolicy:
    """A Policy that edits the parent program in the prompt instead of asking a model."""

    edits_shown_program = True  # asked in full prompts where a spec's are `continue` (evo.policies.prompt_style)

    def __init__(self, config: MutateConfig = MutateConfig()) -> None:
        self.config = config
        self.told = False  # NOTHING_TO_VARY was printed

    def generate(self, prompts: Sequence[str], *, n: int = 1, max_new_tokens: int = 256, temperature: float = 1.0,
                 top_p: float = 1.0, seed: int | None = None, stop: Sequence[str] = ()) -> list[list[Completion]]:
        check_sampling("mutate", n=n, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p)
        rng = random.Random(seed)
        out = []
        for prompt in prompts:
            parent = parent_program(prompt)
            if parent is None:
                out.append([Completion("", (), None, "stop") for _ in range(n)])
                continue
            self._tell_if_nothing_to_vary(parent)
            m = answers_asked(prompt, SearchSettings.MAXIMUM["answers"])
            out.append([Completion(self._reply(parent, m, rng), (), None, "stop") for _ in range(n)])
        return out

    def _tell_if_nothing_to_vary(self, parent: str) -> None:
        if not self.told and not has_values(editable(parent)[2]):
            self.told = True
            print(NOTHING_TO_VARY, file=sys.stderr, flush=True)

    def _reply(self, parent: str, m: int, rng: random.Random) -> str:
        if m == 1:
            return _fenced_reply(mutate_program(parent, rng, self.config))
        return "\n\n".join(f"### Program {k + 1}\n{_fenced_reply(mutate_program(parent, rng, self.config))}"
                           for k in range(m))


def _fenced_reply(program: str) -> str:
    """The program in a fence longer than any backtick run inside it (a docstring's ``` stays code)."""
    fence = fence_for(program)
    return f"{fence}python\n{program if program.endswith(chr(10)) else program + chr(10)}{fence}"


def _constants(tree: ast.AST) -> list[ast.Constant]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)]


def _perturb_constant(tree: ast.AST, rng: random.Random, config: MutateConfig, dry: bool) -> bool:
    nodes = _constants(tree)
    if dry or not nodes:
        return bool(nodes)
    node = rng.choice(nodes)
    if isinstance(node.value, int):
        node.value = node.value + rng.choice((-1, 1)) * max(1, round(abs(node.value) * config.scale * rng.random()))
    else:
        assert isinstance(node.value, float)  # _constants keeps ints and floats
        value = node.value * (1.0 + config.scale * rng.uniform(-1.0, 1.0)) if node.value else rng.uniform(-1.0, 1.0)
        node.value = float(f"{value:.4g}")
    return True


def _operators(tree: ast.AST) -> list[tuple[Any, str, int | None]]:
    """(node, field, index) of each operator a swap can change: BinOp/AugAssign/BoolOp `op`, Compare `ops[index]`."""
    sites: list[tuple[Any, str, int | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.BinOp, ast.AugAssign, ast.BoolOp)) and type(node.op) in SWAPS:
            sites.append((node, "op", None))
        elif isinstance(node, ast.Compare):
            sites.extend((node, "ops", i) for i, op in enumerate(node.ops) if type(op) in SWAPS)
    return sites


def _swap_operator(tree: ast.AST, rng: random.Random, config: MutateConfig, dry: bool) -> bool:
    sites = _operators(tree)
    if dry or not sites:
        return bool(sites)
    node, field, index = rng.choice(sites)
    if index is None:
        node.op = rng.choice(SWAPS[type(node.op)])()
    else:
        node.ops[index] = rng.choice(SWAPS[type(node.ops[index])])()
    return True


def _statement_lists(tree: ast.AST, min_len: int) -> list[list[ast.stmt]]:
    lists = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and len(body) >= min_len and all(isinstance(s, ast.stmt) for s in body):
                lists.append(body)
    return lists


def _delete_statement(tree: ast.AST, rng: random.Random, config: MutateConfig, dry: bool) -> bool:
    names = _names(ast.walk(tree))
    lists = [(body, free) for body in _statement_lists(tree, 2)  # never empty a block
             if (free := [i for i, statement in enumerate(body) if _deletable(statement, names)])]
    if dry or not lists:
        return bool(lists)
    body, free = rng.choice(lists)
    del body[rng.choice(free)]
    return True


def _deletable(statement: ast.stmt, names: tuple[Counter[str], Counter[str]]) -> bool:
    """Whether deleting `statement` leaves bound every name the rest of the code reads
    (`names`: the whole code's bindings and reads): deleting the only assignment of a name
    still read is a NameError whatever the input."""
    bound, read = names
    bound_here, read_here = _names(ast.walk(statement))
    return all(bound[name] > count or read[name] == read_here[name] for name, count in bound_here.items())


def _names(nodes: Iterable[ast.AST]) -> tuple[Counter[str], Counter[str]]:
    """How often each name is bound (assignment and loop targets, parameters, imports,
    definitions) and read among these nodes (ast.walk order: `x += 1` reads x, binds nothing)."""
    bound: Counter[str] = Counter()
    read: Counter[str] = Counter()
    updated: set[int] = set()
    for node in nodes:
        if isinstance(node, ast.AugAssign):
            updated.add(id(node.target))
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) and id(node) not in updated else read)[node.id] += 1
        elif isinstance(node, ast.arg):
            bound[node.arg] += 1
        elif isinstance(node, ast.alias):
            bound[node.asname or node.name.split(".")[0]] += 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound[node.name] += 1
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            bound[node.name] += 1
    return bound, read


def _common_indent(text: str) -> str:
    indents = [line[: len(line) - len(line.lstrip())] for line in text.splitlines() if line.strip()]
    if not indents:
        return ""
    shortest = min(indents, key=len)
    return shortest if all(i.startswith(shortest) for i in indents) else ""


def _dedent(text: str, indent: str) -> str:
    return "".join(line[len(indent):] if line.startswith(indent) else line for line in text.splitlines(keepends=True))


def parse_options(text: str) -> MutateConfig:
    """`max_edits=3,scale=0.5` (both optional) -> MutateConfig; one-line error otherwise."""
    fields: dict = {}
    for item in filter(None, text.split(",")):
        key, has_value, value = item.partition("=")
        if key not in RANGES or not has_value:
            raise UserError(f"mutate: unknown option {key!r}; known: max_edits=N, scale=X")
        fields[key] = parse_option("mutate", key, value, RANGES)
    return MutateConfig(**fields)
