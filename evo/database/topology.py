"""Island topologies: a registry of named graph builders, and explicit edge lists.

networkx is imported when a graph is built, so reading the names (spec validation,
`evo --help`) stays light.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from evo.errors import UserError

if TYPE_CHECKING:
    import networkx as nx


def _ring(islands: int, seed: int) -> nx.Graph:
    import networkx as nx

    return nx.cycle_graph(islands) if islands > 2 else nx.path_graph(islands)


def _complete(islands: int, seed: int) -> nx.Graph:
    import networkx as nx

    return nx.complete_graph(islands)


def _random_regular(islands: int, seed: int) -> nx.Graph:
    """Degree 3, or less for few islands (degree * islands must be even)."""
    import networkx as nx

    degree = min(3, islands - 1)
    if degree * islands % 2:
        degree -= 1
    return nx.random_regular_graph(degree, islands, seed=seed) if degree > 0 else nx.empty_graph(islands)


TOPOLOGIES: dict[str, Callable[[int, int], nx.Graph]] = {
    "ring": _ring, "complete": _complete, "random-regular": _random_regular,
}


def topology(kind: str | Sequence[Sequence[int]], islands: int, seed: int = 0) -> nx.Graph:
    """A named topology from TOPOLOGIES, or the graph of an explicit list of [a, b] edges."""
    if isinstance(kind, str):
        if kind not in TOPOLOGIES:
            raise UserError(f"unknown topology {kind!r}; choose one of {', '.join(TOPOLOGIES)} or a list of [a, b] edges")
        return TOPOLOGIES[kind](islands, seed)
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(islands))
    for a, b in kind:
        if not (0 <= a < islands and 0 <= b < islands) or a == b:
            raise UserError(f"search.topology edge [{a}, {b}] must join two different islands in 0..{islands - 1}")
        graph.add_edge(a, b)
    return graph
