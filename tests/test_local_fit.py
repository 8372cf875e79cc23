"""`local:` refuses a spec whose prompts cannot fit the checkpoint's context before its
weights load, and names the shipped checkpoints' tasks and contexts."""

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from evo import spec as spec_module
from evo.errors import UserError
from evo.policies import fit

ROOT = Path(__file__).resolve().parents[1]


def test_a_python_problem_does_not_fit_a_shipped_maze_checkpoint():
    spec = spec_module.load(ROOT / "examples" / "function_minimization" / "problem.toml")
    with pytest.raises(UserError, match=r"more than the model's context of 512.*maze-warmup \(maze, 512 tokens\)"
                                        r".*openai:URL#MODEL;chat.*vllm:PATH"):
        fit.check(spec, "local:maze-warmup")
    fit.check(spec, "mutate:")  # other policies: nothing to check


def test_the_maze_example_fits_its_checkpoint():
    spec = spec_module.load(ROOT / "examples" / "maze_evolution" / "problem.toml")
    fit.check(spec, "local:maze-warmup")
    assert 0 < len(fit.smallest_prompt(spec)) < 512


@pytest.mark.slow
def test_evo_run_refuses_before_loading_and_keeps_no_directory(tmp_path):
    evo = shutil.which("evo") or pytest.skip("the evo console script is not installed")
    out = tmp_path / "run"
    start = time.monotonic()
    result = subprocess.run([evo, "run", str(ROOT / "examples" / "function_minimization" / "problem.toml"),
                             "--policy", "local:maze-grpo", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "local:maze-grpo: the smallest prompt of" in result.stderr and not out.exists()
    print(f"refused after {time.monotonic() - start:.1f} s")


PROBLEM = str(ROOT / "examples" / "function_minimization" / "problem.toml")


def test_evo_train_spec_refuses_before_loading_and_keeps_no_out(tmp_path, capsys):
    from tests.evo_cli import refused

    out = tmp_path / "train"
    error = refused(capsys, "train", "--spec", PROBLEM, "--init", "maze-warmup", "--steps", "1", "--out", str(out))
    assert "the smallest prompt of" in error and "--init MODEL_DIR" in error and error.count("\n") == 1, error
    assert not out.exists()


def test_evo_compare_spec_refuses_before_loading_and_keeps_no_out(tmp_path, capsys):
    from tests.evo_cli import refused

    out = tmp_path / "compare"
    error = refused(capsys, "compare", "--spec", PROBLEM, "--policy", "a=mutate:", "--policy", "b=local:maze-warmup",
                    "--out", str(out))
    assert "b=local:maze-warmup" not in error and "local:maze-warmup: the smallest prompt" in error, error
    assert "--policy NAME='openai:URL#MODEL;chat'" in error and not out.exists()


def test_a_compare_stopped_in_its_search_keeps_nothing_and_names_no_inner_run(tmp_path, capsys, monkeypatch):
    from evo.compare import spec_search
    from tests.evo_cli import refused

    def stops(spec_path, overrides, uri, policy, seed, programs, directory, *rest):
        directory.mkdir(parents=True)
        raise UserError("the server went away")

    monkeypatch.setattr(spec_search, "run_one", stops)
    out = tmp_path / "compare"
    error = refused(capsys, "compare", "--spec", PROBLEM, "--policy", "a=mutate:", "--out", str(out))
    assert "the server went away" in error and "run the same command again" in error and "--resume" not in error
    assert not out.exists()


@pytest.mark.parametrize("remedy, command", [(fit.RUN_REMEDY, "run"), (fit.COMPARE_REMEDY, "compare"),
                                             (fit.TRAIN_REMEDY, "train")])
def test_every_suggestion_names_flags_of_its_command(remedy, command):
    import re

    import click

    from evo.cli import cli

    flags = set(re.findall(r"--[a-z][a-z-]*", remedy))
    known = {opt for param in cli.get_command(click.Context(cli), command).params for opt in param.opts}
    assert flags and flags <= known, flags - known
