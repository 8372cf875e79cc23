"""`evo show DIR [--json] [--plots] [--lineage FILE] [--failures] [--program N]`: what a run found
(evo/report/summary.py gathers it, evo/report/text.py words it, evo/report/files.py writes the files)."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command(name="show")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="print the summary as one JSON object")
@click.option("--plots", is_flag=True, help="write DIR/archive.png and DIR/best_so_far.png (needs matplotlib)")
@click.option("--lineage", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="export the genealogy to FILE (.graphml or .json)")
@click.option("--failures", is_flag=True, help="list the ten most common failure messages, each with an example's output")
@click.option("--program", "program_id", type=int, default=None,
              help="print program N: its scores (or failure), parents, lineage and code")
def command(directory: Path, as_json: bool, plots: bool, lineage: Path | None, failures: bool,
            program_id: int | None) -> None:
    """What the run in DIRECTORY found: best program, Pareto front, coverage."""
    from evo.report import files, summary, text

    if program_id is not None:
        view = summary.program_view(directory, program_id)
        click.echo(json.dumps(view) if as_json else "\n".join(text.program_lines(view)))
        return
    data = summary.summary(directory)
    notes = files.write_plots(directory) if plots else []
    if lineage is not None:
        notes.append(f"wrote {files.export_lineage(directory, lineage)}")
    if as_json:
        click.echo(json.dumps(data))
        for note in notes:
            click.echo(note, err=True)
        return
    for line in [*text.summary_lines(data, directory, full_failures=failures), *notes]:
        click.echo(line)
