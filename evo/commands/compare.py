"""`evo compare`: two modes under one name, each its own click command with only its own flags.

    evo compare --task T    --policy NAME=URI ...   evo/commands/compare_task.py (sampling metrics, then search)
    evo compare --spec SPEC --policy NAME=URI ...   evo/commands/compare_spec.py (search on your own problem)

`--task` or `--spec` picks the mode; a flag of the other mode is refused in one line that
names the mode it belongs to.
"""

from __future__ import annotations

import click

from evo.commands import compare_spec, compare_task
from evo.errors import UserError

MODES: dict[str, click.Command] = {"--task": compare_task.command, "--spec": compare_spec.command}
HELP = ("Compare policies on a task family (--task T: matched-budget sampling metrics, then evolutionary search) "
        "or by evolutionary search on your own problem (--spec PROBLEM.toml).")


def flags(command: click.Command) -> set[str]:
    """Every spelling of every option of `command` (--name, --no-name, -x)."""
    return {name for param in command.params if isinstance(param, click.Option)
            for name in (*param.opts, *param.secondary_opts)}


def mode_of(args: list[str]) -> str | None:
    """The mode flag among `args` ("--task" or "--spec"); None when neither; a UserError for both."""
    given = {flag for flag in MODES for arg in args if arg == flag or arg.startswith(flag + "=")}
    if len(given) > 1:
        raise UserError("give --task T (a task family) or --spec PROBLEM.toml (your problem), one of them")
    return next(iter(given), None)


def refuse_other_mode(mode: str, option: str | None) -> None:
    """A UserError when `option` is a flag of the other mode only."""
    other = next(flag for flag in MODES if flag != mode)
    if option and option in flags(MODES[other]) - flags(MODES[mode]):
        raise UserError(f"{option} belongs to evo compare {other} (the {other[2:]} mode), not to evo compare {mode}")


class Compare(click.Command):
    """Hands the command line to the mode its --task or --spec names (evo/cli.py calls make_context)."""

    def make_context(self, info_name, args, parent=None, **extra) -> click.Context:
        mode = mode_of(args)
        if mode is None:
            if any(arg in ("--help", "-h") for arg in args):
                click.echo(self.both_helps(info_name, parent))
                raise click.exceptions.Exit(0)
            raise UserError("give --task T (a task family) or --spec PROBLEM.toml (your problem), one of them")
        try:
            return MODES[mode].make_context(info_name, args, parent=parent, **extra)
        except click.NoSuchOption as error:
            refuse_other_mode(mode, error.option_name)
            raise

    def both_helps(self, info_name, parent) -> str:
        parts = [HELP]
        for flag, command in MODES.items():
            ctx = click.Context(command, info_name=f"{info_name} {flag} ...", parent=parent)
            parts.append(f"\n== evo compare {flag} ==\n\n{command.get_help(ctx)}")
        return "\n".join(parts)


command = Compare(name="compare", help=HELP, short_help="Compare policies on a task family (--task) or your own problem (--spec).")
