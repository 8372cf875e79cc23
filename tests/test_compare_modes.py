"""`evo compare`'s two modes: `--task` or `--spec` picks one; each mode's flags are declared with
their mode, and a flag of the other mode is refused in one line naming the mode it belongs to."""

from __future__ import annotations

import click
import pytest

from evo.commands import compare
from tests.evo_cli import refused

SPEC = "examples/nguyen7/problem.toml"
SHARED = {"--policy", "--answers", "--seed", "--out", "--json", "--quiet", "--tokens-per-answer"}
TASK_ONLY = {"--task", "--k", "--instances", "--pool", "--temperature", "--search-instances",
             "--search-seeds", "--search-programs", "--search-pool", "--search-hard-below", "--search-instance-seed", "--resume"}
SPEC_ONLY = {"--spec", "--seeds", "--programs", "--set", "--train", "--train-every", "--train-option"}
VALUES = {"--resume": [], "--json": [], "--quiet": []}  # flags that take no value


def flags(mode: str | None) -> set[str]:
    """The spellings of `evo compare`'s flags of `mode` (None: those both modes take)."""
    return {name for param in compare.command.params if isinstance(param, click.Option)
            and getattr(param, "mode", None) == mode for name in (*param.opts, *param.secondary_opts)}


def test_each_mode_has_only_its_own_flags():
    assert flags(None) - {"--help"} == SHARED | {"--task", "--spec"}
    assert flags("--task") == TASK_ONLY - {"--task"} and flags("--spec") == SPEC_ONLY - {"--spec"}


@pytest.mark.parametrize("flag", sorted(SPEC_ONLY - {"--spec"}))
def test_a_spec_flag_in_the_task_mode_names_its_mode(capsys, flag):
    line = refused(capsys, "compare", "--task", "maze", "--policy", "a=mutate:", flag, *VALUES.get(flag, ["1"]))
    assert line == f"error: {flag} belongs to evo compare --spec (the spec mode), not to evo compare --task\n"


@pytest.mark.parametrize("flag", sorted(TASK_ONLY - {"--task"}))
def test_a_task_flag_in_the_spec_mode_names_its_mode(capsys, flag):
    line = refused(capsys, "compare", "--spec", SPEC, "--policy", "a=mutate:", flag, *VALUES.get(flag, ["1"]))
    assert line == f"error: {flag} belongs to evo compare --task (the task mode), not to evo compare --spec\n"


def test_one_mode_is_chosen(capsys):
    for args in (["--policy", "a=mutate:"], ["--task", "maze", f"--spec={SPEC}"], ["--spec", SPEC, "--task=maze"],
                 ["--pool", "2", "--policy", "a=mutate:"]):
        assert "give --task T (a task family) or --spec PROBLEM.toml" in refused(capsys, "compare", *args)


def test_an_unknown_flag_is_clicks_own_error(capsys):
    assert "No such option '--bogus'" in refused(capsys, "compare", "--spec", SPEC, "--bogus")


def test_help_shows_both_modes(capsys):
    from evo.cli import main

    assert main(["compare", "--help"]) is None
    text = " ".join(capsys.readouterr().out.split())
    assert "--task T" in text and "--spec PROBLEM.toml" in text
    assert "[--task] seed of the hard search instances" in text and "[--spec] --train: committed iterations" in text
