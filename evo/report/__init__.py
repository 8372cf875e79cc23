"""`evo report DIR`: one self-contained HTML page of a run (evo/report/data.py gathers,
evo/report/page.py and svg.py draw)."""

from __future__ import annotations

from pathlib import Path

from evo.report.data import RunRecords, gather
from evo.report.page import render


def write(directory: Path, out: Path | None = None, x: str | None = None, y: str | None = None) -> Path:
    """Write the report of the run in `directory` to `out` (default DIR/report.html)."""
    out = Path(out) if out is not None else Path(directory) / "report.html"
    text = render(gather(RunRecords.read(Path(directory)), x, y))
    partial = out.with_name(out.name + ".tmp")
    partial.write_text(text, encoding="utf-8")
    partial.replace(out)
    return out


__all__ = ["RunRecords", "gather", "render", "write"]
