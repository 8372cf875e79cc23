"""The `evo` command line. Each subcommand lives in its own module and is imported lazily,
so `evo --help` is instant and `evo check` never pays for torch.

To add a command: write `evo/commands/NAME.py` with a click command called `command`, and
add it to COMMANDS below.
"""

from __future__ import annotations

import importlib
import sys

import click

from evo.errors import UserError

COMMANDS: dict[str, str] = {
    # name: module holding a click command named `command`
    "check": "evo.commands.check",
    "run": "evo.commands.run",
    "show": "evo.commands.show",
    "train": "evo.commands.train",
    "pretrain": "evo.commands.pretrain",
    "tasks": "evo.commands.tasks",
    "compare": "evo.commands.compare",
    "report": "evo.commands.report",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        return importlib.import_module(COMMANDS[name]).command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="vpo-evo")
def cli() -> None:
    """vpo-evo: evolutionary test-time search with a VPO-trained model backend."""


def main(argv: list[str] | None = None) -> None:
    """Entry point: user errors become one line on stderr and a non-zero exit, never a traceback."""
    try:
        code = cli.main(args=argv, prog_name="evo", standalone_mode=False)
    except UserError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(error.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as error:
        click.echo(f"error: {_one_line(error)}", err=True)
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    if isinstance(code, int) and code:
        sys.exit(code)


def _one_line(error: click.ClickException) -> str:
    """A click error (bad option value, unknown option, missing argument) as one line."""
    ctx = getattr(error, "ctx", None)
    hint = f" (see '{ctx.command_path} --help')" if isinstance(error, click.UsageError) and ctx else ""
    return " ".join(error.format_message().split()) + hint


if __name__ == "__main__":
    main()
