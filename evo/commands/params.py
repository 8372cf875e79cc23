"""Click option types and flag sets: the sampling settings, checked by the policies' own range
rules (evo/policies/options.py), so a bad value is refused before any policy is built or
called; flags whose defaults are a config dataclass's fields; choices read from a registry; the
spec-override flags; the loop's run options. The commands share option parsing through this
module and evo/commands/values.py only, never by importing each other."""

from __future__ import annotations

import types
import typing
from dataclasses import fields
from pathlib import Path

import click

from evo.commands.values import SECTIONS
from evo.commands.option_types import SamplingParam


TEMPERATURE = SamplingParam("temperature")
TOP_P = SamplingParam("top_p")
MAX_NEW_TOKENS = SamplingParam("max_new_tokens")


def _click_type(annotation: object) -> type:
    kinds = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    if bool in kinds:
        return bool
    for kind in (int, float):
        if kind in kinds and str not in kinds:
            return kind
    return str


def spec_options(command):
    """One `--name` flag per spec setting ([sandbox], [search], [prompt]); `--set` for the rest."""
    hints = {section: typing.get_type_hints(cls) for section, cls in SECTIONS.items()}
    for section, cls in reversed(SECTIONS.items()):
        for f in reversed(fields(cls)):
            flag = "--" + f.name.replace("_", "-")
            command = click.option(flag, f"{section}__{f.name}", type=_click_type(hints[section][f.name]),
                                   default=None, help=f"override [{section}] {f.name}")(command)
    return command




def compare_options(command):
    """The flags both modes of `evo compare` take (--task and --spec): the policies and the output."""
    shared = [
        click.option("--policy", "policies", multiple=True, metavar="NAME=URI",
                     help="a policy to compare (repeatable; the first is the baseline)"),
        click.option("--answers", multiple=True, metavar="NAME=M",
                     help="programs per reply for a policy (default: from its train_config.json, else 1)"),
        click.option("--seed", default=0, show_default=True, type=int),
        click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("runs/compare"),
                     show_default=True),
        click.option("--json", "as_json", is_flag=True, help="print the result as one JSON object"),
        click.option("--quiet", is_flag=True, help="no progress bar"),
    ]
    for option in reversed(shared):
        command = option(command)
    return command


RUN_PREFIX = "loop__"  # the keyword names of run_options' flags


def run_options(command):
    """One flag per field of the loop's RunOptions (--batch, --depth, --max-new-tokens, ...), unset
    by default (a new run: the field's default; a resumed run: its stored value)."""
    from evo.loop import RunOptions

    for f in reversed(fields(RunOptions)):
        rule = f.metadata
        kind = SamplingParam(f.name) if rule["sampling"] else click.IntRange(min=rule["minimum"])
        default = "" if f.default is None else f" (default {f.default})"
        command = click.option("--" + f.name.replace("_", "-"), RUN_PREFIX + f.name, type=kind, default=None,
                               help=rule["help"] + default)(command)
    return command


def run_options_given(options: dict) -> dict:
    """The RunOptions fields set by run_options' flags: name -> value (unset flags left out)."""
    return {name[len(RUN_PREFIX):]: value for name, value in options.items()
            if name.startswith(RUN_PREFIX) and value is not None}


