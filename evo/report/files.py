"""What `evo show` writes beside a run: PNG plots of the MAP-Elites archive and of the best
scalar so far (the data of evo/report/data.py's `grid` and `curves`, drawn with matplotlib),
and the genealogy as GraphML or node-link JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from evo.errors import UserError
from evo.report.data import RunRecords, curves, evaluated, grid

MISSING_MATPLOTLIB = "plots skipped: matplotlib is missing (pip install 'vpo-evo[plots]')"


def write_plots(directory: Path) -> list[str]:
    """Write DIR/archive.png (when the run has features) and DIR/best_so_far.png; the lines to print."""
    try:
        import matplotlib
    except ImportError:
        return [MISSING_MATPLOTLIB]
    matplotlib.use("Agg")
    records = RunRecords.read(directory)
    programs = evaluated(records)
    try:
        written = [heatmap(grid(programs, records.features), directory / "archive.png"),
                   best_so_far(curves(programs, records.objectives), directory / "best_so_far.png")]
    except OSError as error:
        raise UserError(f"{directory}: cannot write the plots there ({error.strerror}); "
                        "copy the run somewhere writable first") from None
    return [f"wrote {p}" for p in written if p is not None]


def heatmap(cells: dict | None, path: Path) -> Path | None:
    """`cells` (data.grid: the elite's scalar per cell over the first two features) as a heatmap."""
    import matplotlib.pyplot as plt

    if cells is None:
        return None
    features = cells["features"]
    values = np.array([[np.nan if v is None else v for v in row] for row in cells["values"]], dtype=float)
    fig, ax = plt.subplots(figsize=(6, 5))
    image = ax.imshow(values.T, origin="lower", aspect="auto", cmap="viridis")
    fig.colorbar(image, ax=ax, label="best scalar in cell")
    ax.set_xlabel(f"{features[0]['name']} {features[0]['range']}")
    ax.set_ylabel(f"{features[1]['name']} {features[1]['range']}" if len(features) > 1 else "")
    ax.set_title(f"archive: coverage {cells['coverage']:.0%}")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def best_so_far(curve: dict, path: Path) -> Path:
    """`curve` (data.curves: the best scalar so far per iteration) as a step plot that rises
    from the first program's scalar."""
    import matplotlib.pyplot as plt

    start = [] if curve["first"] is None else [curve["iterations"][0]]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.step(start + curve["iterations"], [curve["first"]] * len(start) + curve["scalar"], where="post")
    ax.set_xlabel("iteration")
    ax.set_ylabel("best scalar so far")
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def export_lineage(directory: Path, path: Path) -> Path:
    """The genealogy (parent -> child, source -> copy) of the run in `directory`, written to
    `path` as GraphML or node-link JSON (`.json`)."""
    import networkx as nx

    from evo.database import Database

    with Database.open(directory, read_only=True) as db:
        graph = db.genealogy()
    for _, data in graph.nodes(data=True):
        for key, value in list(data.items()):
            if value is None:
                data[key] = "" if key in ("origin", "failure") else float("nan")
    try:
        if path.suffix == ".json":
            path.write_text(json.dumps(nx.node_link_data(graph, edges="edges"), default=str))
        else:
            nx.write_graphml(graph, path)
    except OSError as error:
        raise UserError(f"{path}: cannot write the lineage ({error.strerror}); pick another path") from None
    return path
