"""What `evo compare` writes, for both of its modes: OUT/compare.json (the result), OUT/compare.md
(the markdown table, also printed), the arrays behind it (.npz) and the plots (matplotlib)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evo.compare import plots


@dataclass(frozen=True)
class Comparison:
    """A finished comparison: `result` (compare.json), `markdown` (compare.md), `arrays` saved
    to `arrays_file`, and `draw(out)`, the mode's plots written into `out`."""

    result: dict
    markdown: str
    arrays_file: str
    arrays: dict[str, Any] = field(default_factory=dict)
    draw: Callable[[Path], list[Path]] = lambda out: []


@dataclass(frozen=True)
class Written:
    files: list[Path]  # compare.md, compare.json, then the plots
    plots_skipped: bool  # matplotlib is missing


PLOTS_SKIPPED = "plots skipped: matplotlib is missing (pip install 'vpo-evo[plots]')"


def write(comparison: Comparison, out: Path) -> Written:
    """Write `comparison` into `out` (which exists)."""
    (out / "compare.json").write_text(json.dumps(comparison.result, indent=1) + "\n")
    (out / "compare.md").write_text(comparison.markdown)
    np.savez_compressed(out / comparison.arrays_file, **comparison.arrays)
    drawn = comparison.draw(out) if plots.available() else []
    return Written([out / "compare.md", out / "compare.json", *drawn], not plots.available())


def reproduce(command: str | None) -> list[str]:
    """The markdown lines that end a comparison's page: the command that made it."""
    return ["Reproduce:", "", "```bash", command, "```", ""] if command else []
