"""No import circles among the modules of evo/ and training/ (tasks/ is in the graph, so a
circle passing through it counts; one wholly inside tasks/ is that package's own business).

The graph has one node per module (a package is its `__init__`) and an edge A -> B when A's
source names B in an import statement that runs: `import x.y`, `from x import y` (B is the
submodule x.y when it exists, else the package x), relative imports resolved, imports inside
functions included (they run when the function does), imports under `if TYPE_CHECKING:`
left out (they never run).

What is not an edge: the implicit import of the parents of a dotted name. Python initialises
package `evo.database` before `evo.database.config`, but a package whose `__init__` gathers
its own submodules is the normal layout, and a submodule importing a sibling by its full
path does not read the half-made package. A cycle through a package is one that names it:
a submodule doing `from evo.database import Database` while `evo/database/__init__.py`
imports that submodule reads the package half-made, and is reported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("evo", "training", "tasks")
OURS = ("evo", "training")  # the packages whose circles are refused


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """The Import / ImportFrom nodes that run (everything but `if TYPE_CHECKING:` bodies)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        children = list(ast.iter_child_nodes(node))
        if isinstance(node, ast.If) and _type_checking_only(node):
            children = [*node.orelse]
        stack.extend(children)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of `from <node.module> import ...` written in `module`."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def targets(module: str, is_package: bool, tree: ast.AST, known: set[str]) -> set[str]:
    """The project modules `module` imports (see the module docstring for what counts)."""
    found: set[str] = set()
    for node in _imports(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
            continue
        source = _resolve(module, is_package, node)
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            if submodule in known:
                found.add(submodule)
            elif source in known:
                found.add(source)
    found.discard(module)
    return found


def import_graph() -> nx.DiGraph:
    paths = [path for package in PACKAGES for path in (ROOT / package).rglob("*.py")]
    known = {module_name(path) for path in paths}
    graph = nx.DiGraph()
    for path in paths:
        module = module_name(path)
        graph.add_node(module)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for target in targets(module, path.name == "__init__.py", tree, known):
            graph.add_edge(module, target)
    return graph


def test_the_project_has_no_import_circle():
    graph = import_graph()
    assert graph.number_of_nodes() > 80 and graph.has_edge("evo.commands.run", "evo.commands.params")
    cycles = sorted(" -> ".join([*cycle, cycle[0]]) for cycle in nx.simple_cycles(graph)
                    if any(node.split(".")[0] in OURS for node in cycle))
    assert not cycles, "import circles:\n" + "\n".join(cycles[:20])


def test_commands_import_no_other_command():
    """The CLI's commands (evo/cli.py COMMANDS) share code through evo/commands/params.py, never
    through each other: no module of evo/commands imports another command's module (a command
    may import its own parts, as `evo compare` imports its two modes)."""
    from evo.cli import COMMANDS

    graph = import_graph()
    commands = set(COMMANDS.values())
    assert commands <= set(graph)
    crossing = sorted(f"{a} -> {b}" for a, b in graph.edges
                      if a.startswith("evo.commands.") and b in commands and a != b)
    assert not crossing, crossing


def _graph_of(sources: dict[str, str]) -> nx.DiGraph:
    known = set(sources)
    graph = nx.DiGraph()
    for module, text in sources.items():
        graph.add_node(module)
        is_package = module in {"p", "p.q"}
        for target in targets(module, is_package, ast.parse(text), known):
            graph.add_edge(module, target)
    return graph


def test_the_graph_sees_function_level_relative_and_package_imports():
    graph = _graph_of({
        "p": "from p.a import A\n",                      # a package gathering its submodule: fine alone
        "p.a": "def f():\n    from . import b\n",       # a function-level relative import of a submodule
        "p.b": "from p import A\n",                      # names the package: p -> p.a -> p.b -> p is a circle
        "p.c": "import p.a\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p import A\n",
    })
    assert set(graph.edges) == {("p", "p.a"), ("p.a", "p.b"), ("p.b", "p"), ("p.c", "p.a")}
    assert [sorted(cycle) for cycle in nx.simple_cycles(graph)] == [["p", "p.a", "p.b"]]


def test_a_sibling_import_by_full_path_is_no_circle():
    graph = _graph_of({"p": "from p.a import A\n", "p.a": "from p.b import B\n", "p.b": "X = 1\n"})
    assert not list(nx.simple_cycles(graph))
