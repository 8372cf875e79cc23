"""`evo report DIR [--out FILE] [--x OBJ --y OBJ]`: a run as one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path

import click

from evo.errors import UserError


@click.command(name="report")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="the HTML file to write (default DIR/report.html)")
@click.option("--x", "x", metavar="OBJECTIVE", default=None, help="draw the front over this pair only (default: every pair of up to four objectives)")
@click.option("--y", "y", metavar="OBJECTIVE", default=None, help="the pair's y axis (with --x; default the second objective)")
def command(directory: Path, out: Path | None, x: str | None, y: str | None) -> None:
    """Write DIR/report.html: curves, Pareto front, MAP-Elites grid, lineage of the best, policies, failures."""
    from evo import report

    try:
        written = report.write(directory, out, x, y)
    except OSError as error:
        raise UserError(f"{out or directory}: cannot write the report ({error.strerror}); pick another --out") from None
    click.echo(f"wrote {written}")
