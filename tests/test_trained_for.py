"""Before a run, a checkpoint trained for another task, prompt style, set format or set size
than the spec asks for is one `warning:` line per mismatch (evo/policies/trained_for.py), in
`evo run` and `evo compare --spec`; the shipped checkpoints on their own task's spec get none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evo import spec as specs
from evo.policies import trained_for
from tests.evo_cli import refused

ROOT = Path(__file__).resolve().parents[1]
MAZE = ROOT / "examples" / "maze_evolution" / "problem.toml"  # the maze task's single-route spec: no set_head


@pytest.fixture(scope="module")
def task_specs(tmp_path_factory) -> dict[str, specs.Spec]:
    """Each maze family's own spec of a held-out instance (with its set_head and separator)."""
    import tasks

    out = {}
    for name in ("maze", "maze-clusters"):
        task = tasks.get(name)
        out[name] = specs.load(task.problem_spec(task.instances("test", 1, seed=11)[0], tmp_path_factory.mktemp(name)))
    return out


def test_a_checkpoint_on_its_own_tasks_spec_gets_no_warning(task_specs):
    assert trained_for.warnings(specs.load(MAZE), "local:maze-warmup", 1) == []  # the quick start
    assert trained_for.warnings(task_specs["maze"], "local:maze-vpo", 3) == []
    assert trained_for.warnings(task_specs["maze-clusters"], "local:maze-clusters-vpo", 3) == []
    assert trained_for.warnings(task_specs["maze"], "local:maze-grpo", 2) == []
    assert trained_for.warnings(specs.load(MAZE), "mutate:", 3) == []  # no checkpoint: nothing to compare


def test_the_issue_reproduction_warns_of_the_task_and_the_set_format():
    """maze-clusters-vpo (sets of 3 routes after `|`) on the single-route maze spec: 404 of 600
    programs were unparseable in the issue, with no word before the run."""
    task, form = trained_for.warnings(specs.load(MAZE), "local:maze-clusters-vpo", 3)
    assert task.startswith("warning: local:maze-clusters-vpo was trained on maze-clusters (objectives gold, diamond, "
                           "pearl, amber) and this spec scores completion, gold, diamond, avoid_lava")
    assert "tasks.get('maze-clusters')" in task
    assert "no set_head, separator an EVOLVE-BLOCK-NEXT line" in form and "separator '|'" in form
    assert "use --answers 1" in form
    assert trained_for.warnings(specs.load(MAZE), "local:maze-clusters-vpo", 1) == [task]  # one program: no set format


def test_the_set_format_alone_is_what_a_maze_checkpoint_meets_on_the_maze_example():
    (form,) = trained_for.warnings(specs.load(MAZE), "local:maze-vpo", 3, "--answers vpo=")
    assert "maze's spec" in form and "fewer than the 3 programs" in form and "use --answers vpo=1" in form


def test_more_programs_than_a_set_trained_checkpoint_learned(task_specs):
    (line,) = trained_for.warnings(task_specs["maze"], "local:maze-vpo", 5)
    assert "trained to write sets of 3 programs" in line and line.endswith("use --answers 3")
    assert trained_for.warnings(task_specs["maze"], "local:maze-grpo", 5) == []  # set size 1: a warm-up's two templates


def test_another_prompt_style(task_specs):
    spec = task_specs["maze"].override({"prompt.style": "full"})
    (line,) = trained_for.warnings(spec, "local:maze-vpo", 3)
    assert "'continue' prompts and this spec asks in 'full'" in line and "--set prompt.style=continue" in line


def test_a_checkpoint_trained_on_a_spec_is_compared_with_that_spec(tmp_path, task_specs):
    directory = tmp_path / "ckpt"
    directory.mkdir()
    (directory / "train_config.json").write_text(json.dumps({"task": trained_for.SPEC_TASK + str(MAZE), "set_size": 1}))
    was = trained_for.trained(directory, 1)
    assert was is not None and was.objectives == ("completion", "gold", "diamond", "avoid_lava") and not was.set_head
    (line,) = trained_for.mismatches("local:ckpt", was, task_specs["maze-clusters"], 1)
    assert f"the spec it was trained on, {MAZE}" in line
    (directory / "train_config.json").write_text(json.dumps({"task": "no-such-family"}))
    assert trained_for.trained(directory, 1) is None  # an unknown task: nothing to compare with


def test_spec_training_records_the_prefix_the_check_reads():
    from training.spec_task import TASK_PREFIX

    assert TASK_PREFIX == trained_for.SPEC_TASK


def said(stderr: str) -> list[str]:
    """The warning and error lines of a command's stderr (the model loader draws a progress bar there too)."""
    return [line for line in stderr.splitlines() if line.startswith(("warning: ", "error: "))]


def test_evo_run_and_compare_warn_before_any_work(tmp_path, capsys):
    """Both commands print the warnings before their later refusals (here: an --out already in use)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text("{}")
    error = refused(capsys, "run", str(MAZE), "--policy", "local:maze-clusters-vpo", "--answers", "3", "--out", str(run))
    lines = said(error)
    assert len(lines) == 3 and lines[0].startswith("warning: local:maze-clusters-vpo was trained on maze-clusters")
    assert "set_head" in lines[1] and lines[2].startswith("error: ") and "already holds a run" in lines[2]

    compare = tmp_path / "compare"
    compare.mkdir()
    (compare / "compare.json").write_text("{}")
    error = refused(capsys, "compare", "--spec", str(MAZE), "--policy", "base=mutate:", "--policy",
                    "vpo=local:maze-clusters-vpo", "--answers", "vpo=3", "--out", str(compare))
    lines = said(error)
    assert len(lines) == 3 and "use --answers vpo=1" in lines[1] and "already holds a comparison" in lines[2]


def test_a_budget_below_the_spec_programs_length_is_one_warning(task_specs, tmp_path, capsys):
    """A trained checkpoint is searched at the tokens a program it was trained to write: where
    the spec's initial program takes more, every program as long is cut and unparseable, so one
    line says so before the run (the shipped checkpoints on their own task's spec: none; a
    budget given with --max-new-tokens: none, it is the user's)."""
    import shutil

    from evo.policies import resolve_checkpoint

    maze = task_specs["maze-clusters"]
    assert trained_for.cut_warnings(maze, "local:maze-clusters-vpo") == []  # 66 tokens a route: room enough
    assert trained_for.cut_warnings(maze, "local:maze-clusters-warmup") == []  # no trained budget: the loop's default
    assert trained_for.cut_warnings(maze, "mutate:", 5) == []
    (shared,) = trained_for.cut_warnings(maze, "local:maze-clusters-vpo", 5, "--tokens-per-answer")  # a comparison's
    assert shared.startswith("warning: local:maze-clusters-vpo is searched at 5 tokens a program, the largest any "
                             "compared policy was trained to write,") and "give --tokens-per-answer" in shared
    short = tmp_path / "short"  # the shipped checkpoint, recorded as trained at 2 tokens a route
    shutil.copytree(resolve_checkpoint("maze-clusters-vpo"), short)
    record = json.loads((short / "train_config.json").read_text())
    (short / "train_config.json").write_text(json.dumps({**record, "max_new_tokens": 6}))
    (line,) = trained_for.cut_warnings(maze, f"local:{short}")
    assert "at 2 tokens a program, the tokens it was trained to write (train_config.json)" in line
    needed = int(line.split("initial program takes ")[1].split(":")[0])
    assert needed > 2 and f"--max-new-tokens {2 * needed + 64}" in line
    from evo.policies import trained_tokens

    (short / "train_config.json").write_text(json.dumps({**record, "max_new_tokens": 6, "task": f"spec:{maze.path}"}))
    assert trained_tokens(f"local:{short}") is None  # trained on a spec: its budget was the loop's own rule, kept
    (short / "train_config.json").write_text(json.dumps({**record, "max_new_tokens": 6}))
    run(str(maze.path), "--policy", f"local:{short}", "--out", str(tmp_path / "r"))  # evo run says it before the run
    assert capsys.readouterr().err.count("tokens a program") == 1
    for given in ("80", "3"):  # a budget the user gives is the user's: nothing
        run(str(maze.path), "--policy", f"local:{short}", "--out", str(tmp_path / f"r{given}"), "--max-new-tokens", given)
        assert "tokens a program" not in capsys.readouterr().err


def run(*args: str) -> None:
    from evo.cli import main

    try:
        main(["run", *args, "--iterations", "1", "--quiet", "--threads", "1"])
    except SystemExit as stop:
        assert stop.code in (0, None)
