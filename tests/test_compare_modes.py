"""`evo compare`'s two modes: `--task` and `--spec` are two click commands, each with only its own
flags; a flag of the other mode is refused in one line naming the mode it belongs to."""

from __future__ import annotations

import pytest

from evo.commands import compare, compare_spec, compare_task
from evo.errors import UserError
from tests.evo_cli import refused

SPEC = "examples/nguyen7/problem.toml"
SHARED = {"--policy", "--answers", "--seed", "--out", "--json", "--quiet"}
TASK_ONLY = {"--task", "--k", "--instances", "--pool", "--temperature", "--tokens-per-answer", "--search-instances",
             "--search-seeds", "--search-programs", "--search-pool", "--search-instance-seed", "--resume"}
SPEC_ONLY = {"--spec", "--seeds", "--programs", "--set", "--train", "--train-every", "--train-option"}
VALUES = {"--resume": [], "--json": [], "--quiet": []}  # flags that take no value


def test_each_mode_has_only_its_own_flags():
    assert compare.flags(compare_task.command) - {"--help"} == SHARED | TASK_ONLY
    assert compare.flags(compare_spec.command) - {"--help"} == SHARED | SPEC_ONLY


@pytest.mark.parametrize("flag", sorted(SPEC_ONLY - {"--spec"}))
def test_a_spec_flag_in_the_task_mode_names_its_mode(capsys, flag):
    line = refused(capsys, "compare", "--task", "maze", "--policy", "a=mutate:", flag, *VALUES.get(flag, ["1"]))
    assert line == f"error: {flag} belongs to evo compare --spec (the spec mode), not to evo compare --task\n"


@pytest.mark.parametrize("flag", sorted(TASK_ONLY - {"--task"}))
def test_a_task_flag_in_the_spec_mode_names_its_mode(capsys, flag):
    line = refused(capsys, "compare", "--spec", SPEC, "--policy", "a=mutate:", flag, *VALUES.get(flag, ["1"]))
    assert line == f"error: {flag} belongs to evo compare --task (the task mode), not to evo compare --spec\n"


def test_one_mode_is_chosen(capsys):
    for args in (["--policy", "a=mutate:"], ["--task", "maze", f"--spec={SPEC}"]):
        assert "give --task T (a task family) or --spec PROBLEM.toml" in refused(capsys, "compare", *args)
    assert compare.mode_of(["--task=maze"]) == "--task" and compare.mode_of(["--spec", SPEC]) == "--spec"
    with pytest.raises(UserError):
        compare.mode_of(["--task", "maze", "--spec", SPEC])


def test_an_unknown_flag_is_clicks_own_error(capsys):
    assert "No such option '--bogus'" in refused(capsys, "compare", "--spec", SPEC, "--bogus")


def test_help_shows_both_modes(capsys):
    from evo.cli import main

    assert main(["compare", "--help"]) is None
    text = capsys.readouterr().out
    assert "evo compare --task" in text and "evo compare --spec" in text
    assert "--search-instance-seed" in text and "--train-every" in text
    main(["compare", "--spec", SPEC, "--help"])
    text = capsys.readouterr().out
    assert "--train-every" in text and "--search-seeds" not in text
