"""The layers of the house (shared DESIGN.md, "Parts and arrows" and "One house"), on the import
graph of tests/test_import_graph.py: no arrow from a lower layer up.

- the search core (evo/ below its commands: everything but evo/commands/, evo/cli.py and
  evo/__main__.py) never imports training/;
- training/ never imports the run directory (evo/run_dir.py) or the commands;
- tasks/ never imports training/, and of evo/ it uses only the sandbox's public face (the
  `evo.sandbox` package and `evo.sandbox.candidate`) and the pure metrics (`evo.metrics`);
- nothing below the commands imports a command.
"""

from __future__ import annotations

import pytest

from tests.test_import_graph import _graph_of, import_graph

COMMANDS = ("evo.commands", "evo.cli", "evo.__main__")
TASKS_MAY_USE = {"evo.sandbox", "evo.sandbox.candidate", "evo.metrics"}


def _under(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def upward(graph) -> list[str]:
    """The edges that point from a lower layer to a higher one."""
    bad = []
    for a, b in graph.edges:
        core = _under(a, "evo") and not _under(a, *COMMANDS)
        if core and _under(b, "training"):
            bad.append(f"{a} -> {b}: the search core imports training/")
        if core and _under(b, *COMMANDS):
            bad.append(f"{a} -> {b}: a library module imports a command")
        if _under(a, "training") and (_under(b, "evo.run_dir") or _under(b, *COMMANDS)):
            bad.append(f"{a} -> {b}: training/ imports the run directory or a command")
        if _under(a, "tasks") and (_under(b, "training") or (_under(b, "evo") and b not in TASKS_MAY_USE)):
            bad.append(f"{a} -> {b}: tasks/ reaches past the sandbox's public face")
    return sorted(bad)


def test_no_import_points_up_a_layer():
    graph = import_graph()
    assert graph.has_edge("evo.commands.run", "evo.run_dir")  # the graph is the real one
    assert not upward(graph), "\n".join(upward(graph))


@pytest.mark.parametrize("sources, found", [
    ({"evo.loop": "import training.trainer\n", "training.trainer": ""}, "the search core imports training/"),
    ({"training.online": "from evo.run_dir import loop_config\n", "evo.run_dir": ""}, "the run directory"),
    ({"tasks.x": "from evo.spec import SandboxLimits\n", "evo.spec": ""}, "public face"),
    ({"evo.report.summary": "from evo.commands import params\n", "evo.commands": ""}, "imports a command"),
])
def test_the_rule_sees_each_kind_of_upward_arrow(sources, found):
    assert any(found in line for line in upward(_graph_of(sources)))


def test_commands_may_import_everything_below_them():
    graph = _graph_of({"evo.commands.run": "import training.online\nimport evo.run_dir\n", "training.online": "",
                       "evo.run_dir": "", "tasks.x": "from evo.sandbox import candidate\n", "evo.sandbox.candidate": ""})
    assert upward(graph) == []
