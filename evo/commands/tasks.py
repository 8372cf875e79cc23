"""`evo tasks`: the registered task families and their objectives."""

from __future__ import annotations

import json
from typing import Any

import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(as_json: bool) -> None:
    """List the registered task families with their objectives and weights."""
    import tasks

    rows: list[dict[str, Any]] = []
    for name in tasks.names():
        try:
            task = tasks.get(name)
        except tasks.UnknownTask as error:  # registered, but its optional package is missing
            rows.append({"name": name, "objectives": [], "weights": [], "description": f"unavailable: {error}"})
            continue
        doc = (getattr(task, "description", "") or type(task).__doc__ or "").strip().splitlines()
        rows.append({
            "name": name,
            "objectives": list(task.objectives),
            "weights": [float(w) for w in task.weights],
            "description": doc[0] if doc else "",
        })
    if as_json:
        click.echo(json.dumps({"tasks": rows}))
        return
    width = max([12, *(len(row["name"]) for row in rows)])
    for row in rows:
        click.echo(f"{row['name']:<{width}} {', '.join(row['objectives'])}")
        if row["description"]:
            click.echo(f"{'':<{width}} {row['description']}")
