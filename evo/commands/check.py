"""`evo check SPEC [--json]`: load and validate a problem spec, evaluate its initial
program(s) in the sandbox, print the score vector, the scalar and the features.
Exit 0 when every initial program evaluates, 1 when one fails, 2 for a bad spec; a warning
on stderr when the objectives' scales differ by more than 10x."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click


def _show(program: Path, report: dict[str, Any]) -> None:
    from evo.feedback import printable

    click.echo(f"program   {program}")
    if "error" in report:
        error = report["error"]
        where = f" in cascade stage {error['stage']} ({Path(error['scorer']).name})" if "stage" in error else ""
        click.echo(f"failed    {error['kind']}{where}: {printable(error['message'])}")
        _show_feedback(report.get("feedback", ""), end=True)
        _show_output(report["output"])
        return
    fmt = lambda d: "  ".join(f"{k}={v:.6g}" for k, v in d.items())  # noqa: E731
    click.echo(f"scores    {fmt(report['scores'])}")
    click.echo(f"scalar    {report['scalar']:.6g}")
    click.echo(f"features  {fmt(report['features']) or '(none declared)'}")
    if report["extras"]:
        click.echo(f"extras    {fmt(report['extras'])}")
    click.echo(f"seconds   {report['seconds']:.3f}" + (f" (cascade stage {report['stage']})" if report["stage"] > 1 else ""))
    _show_feedback(report["feedback"])
    _show_output(report["output"])


def _show_feedback(feedback: str, end: bool = False) -> None:
    """The first ten lines of the scorer's feedback text (`end`: the last ten, for a failure's
    artifacts such as a traceback)."""
    from evo.feedback import clean

    lines = clean(feedback.strip()).splitlines()
    for line in lines[-10:] if end else lines[:10]:
        click.echo(f"feedback  {line[:200]}")


def _show_output(output: str) -> None:
    if output:
        click.echo("output    (what the scorer and the candidate printed; the end of it)")
        for line in output.splitlines():
            click.echo(f"  | {line[:300]}")


@click.command(name="check")
@click.argument("spec_path", metavar="SPEC", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def command(spec_path: Path, as_json: bool) -> int:
    """Validate SPEC and evaluate its initial program in the sandbox."""
    from evo import spec as spec_module
    from evo.initial_check import objective_sizes, scale_warning
    from evo.initial_check import report as initial_report
    from evo.sandbox import Sandbox

    spec = spec_module.load(spec_path)
    programs = spec.problem.programs
    codes = [program.read_text(encoding="utf-8") for program in programs]
    with Sandbox.from_spec(spec) as sandbox:
        if not as_json:
            s = spec.sandbox
            click.echo(f"problem   {spec.problem.name} ({spec_path})")
            click.echo(f"sandbox   {sandbox.mode}, {s.workers} worker(s), {s.timeout:g} s, {s.memory_mb} MB")
            if spec.problem.minimize:
                click.echo(f"minimize  {', '.join(spec.problem.minimize)} (shown as reported; the scalar and selection use -value)")
        evaluations = [future.result() for future in [sandbox.submit(code) for code in codes]]
    reports = [initial_report(spec, code, evaluation) for code, evaluation in zip(codes, evaluations)]
    warning = scale_warning(objective_sizes(spec, reports))
    if as_json:
        payload = reports[0] if len(reports) == 1 else {"programs": reports}
        click.echo(json.dumps(payload))
    else:
        for program, report in zip(programs, reports):
            _show(program, report)
    if warning is not None:
        click.echo(warning, err=True)
    return 1 if any("error" in report for report in reports) else 0
