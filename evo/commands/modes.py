"""`evo compare`'s switch: `--task` or `--spec` (eager, so processed first) picks the mode, and
each other flag declared with ModeOption belongs to one mode and is refused in one line under
the other."""

from __future__ import annotations

import click
from click.core import ParameterSource

from evo.errors import UserError

MODES = {"task_name": "--task", "spec_path": "--spec"}  # the switch: parameter name -> flag
ONE_OF = "give --task T (a task family) or --spec PROBLEM.toml (your problem), one of them"


def chosen(ctx: click.Context) -> list[str]:
    """The mode flags given on the command line (processed first: they are eager)."""
    return [flag for name, flag in MODES.items() if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE]


def one_mode(ctx: click.Context, _param, value):
    if len(chosen(ctx)) > 1:
        raise UserError(ONE_OF)
    return value


class ModeOption(click.Option):
    """A flag of one mode only, its help prefixed with the mode; refused under the other mode."""

    def __init__(self, *decls, mode: str, **attrs) -> None:
        super().__init__(*decls, **{"help": "", **attrs})
        self.mode = mode
        self.help = f"[{mode}] {self.help}".rstrip()

    def process_value(self, ctx: click.Context, value):
        if ctx.get_parameter_source(self.name) == ParameterSource.COMMANDLINE and not ctx.resilient_parsing:
            modes = chosen(ctx)
            if not modes:
                raise UserError(ONE_OF)
            if modes[0] != self.mode:
                raise UserError(f"{self.opts[0]} belongs to evo compare {self.mode} (the {self.mode[2:]} mode), "
                                f"not to evo compare {modes[0]}")
        return super().process_value(ctx, value)
