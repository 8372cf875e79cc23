"""`evo compare --resume`: a comparison directory records its settings (OUT/settings.json), so a
resume keeps its finished runs only under the settings that made them; an OUT that is not this
comparison, and a damaged run record, stop the command in one line before any work, nothing in
OUT touched. Real comparisons of `mutate:` on the maze (a few seconds each)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evo.compare import search, settings
from tests.evo_cli import refused

SPEC = str(Path(__file__).resolve().parents[1] / "examples" / "nguyen7" / "problem.toml")
TASK = ["compare", "--task", "maze", "--policy", "a=mutate:", "--policy", "b=mutate:", "--instances", "2", "--pool", "2",
        "--k", "1,2", "--search-instances", "1", "--search-seeds", "1", "--search-programs", "4", "--search-pool", "0",
        "--quiet"]


def evo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evo", *args], capture_output=True, text=True, timeout=300)


def snapshot(directory: Path) -> dict:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished comparison: two `mutate:` policies, one search run each."""
    out = tmp_path_factory.mktemp("compare") / "cmp"
    done = evo(*TASK, "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture
def comparison(finished, tmp_path) -> Path:
    out = tmp_path / "cmp"
    shutil.copytree(finished, out)
    return out


def test_the_settings_are_recorded_and_their_keys_are_flags(finished):
    from evo.commands.compare import command

    recorded = json.loads((finished / settings.SETTINGS_FILE).read_text())
    assert recorded["--search-programs"] == 4 and recorded["--answers"] == ["a=1", "b=1"] and recorded["mode"] == "--task"
    flags = {flag for option in command.params for flag in option.opts}
    assert {key for key in recorded if key.startswith("--")} <= flags
    assert (finished / settings.SETTINGS_FILE).stat().st_mode & 0o077 == 0


@pytest.mark.parametrize("change, named", [
    (["--search-programs", "2"], "--search-programs 4 (now 2)"),
    (["--answers", "b=2"], "--answers a=1 b=1 (now a=1 b=2)"),
    (["--search-seeds", "2"], "--search-seeds 1 (now 2)"),
    (["--search-instance-seed", "5"], "--search-instance-seed 777 (now 5)"),
])
def test_a_resume_with_other_settings_is_refused_before_any_work(capsys, comparison, change, named):
    before = snapshot(comparison)
    line = refused(capsys, *TASK, *change, "--out", str(comparison), "--resume")
    assert line.startswith("error: ") and line.count("\n") == 1 and named in line and "same arguments" in line
    assert snapshot(comparison) == before


def test_a_resume_of_a_policy_under_another_name_is_refused(capsys, comparison):
    args = [a.replace("b=mutate:", "c=mutate:") for a in TASK]
    assert "--policy a=mutate: b=mutate: (now a=mutate: c=mutate:)" in refused(capsys, *args, "--out", str(comparison),
                                                                                 "--resume")


def test_a_resume_of_an_evo_run_directory_is_refused(capsys, nguyen7_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(nguyen7_run, run)
    before = snapshot(run)
    for resume in (["--resume"], []):
        line = refused(capsys, *TASK, "--out", str(run), *resume)
        assert "holds an evo run" in line and line.count("\n") == 1
    assert snapshot(run) == before


def test_a_resume_where_there_is_no_comparison_is_refused(capsys, tmp_path):
    assert "holds no comparison to resume" in refused(capsys, *TASK, "--out", str(tmp_path / "none"), "--resume")
    assert not (tmp_path / "none").exists()


@pytest.mark.slow
def test_a_spec_comparison_is_neither_resumed_by_the_task_mode_nor_overwritten(capsys, comparison, tmp_path):
    out = tmp_path / "spec"
    done = evo("compare", "--spec", SPEC, "--policy", "a=mutate:", "--policy", "b=mutate:", "--seeds", "2", "--programs",
               "4", "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    before = snapshot(out)
    assert "holds an evo compare --spec comparison" in refused(capsys, *TASK, "--out", str(out), "--resume")
    assert snapshot(out) == before
    tasks = snapshot(comparison)
    line = refused(capsys, "compare", "--spec", SPEC, "--policy", "a=mutate:", "--out", str(comparison))
    assert "already holds a comparison" in line and "--resume" not in line
    assert snapshot(comparison) == tasks


GOOD = {"instance": 1, "seed": 0, "policy": "a", "answers": 1, "iterations": 1, "programs_per_iteration": 4,
        "best": [0.5, 0.5, 0.5, 0.75], "tokens": [0], "hypervolume_at": [0, 1, 2, 2, 2, 3, 4, 4],
        "hypervolume": [0.1] * 8}


DAMAGED = [
    ('{"instance": 1', "Expecting"),
    ("", "Expecting value"),
    ("null", "expected a JSON object"),
    ("[]", "expected a JSON object"),
    ("{}", "instance None"),
    (json.dumps({**GOOD, "best": [math.nan] * 4}), "best should be 4 finite numbers"),
    (json.dumps({**GOOD, "best": []}), "best should be 4 finite numbers"),
    (json.dumps({**GOOD, "best": [None] * 4}), "best should be 4 finite numbers"),
    (json.dumps({**GOOD, "hypervolume": []}), "hypervolume should be 8"),
    (json.dumps({**GOOD, "hypervolume": [0.1] * 7 + [math.nan]}), "hypervolume should be 8"),
    (json.dumps({**GOOD, "tokens": [5, 2]}), "tokens should be"),
    (json.dumps({**GOOD, "programs_per_iteration": 0}), "programs_per_iteration"),
    (json.dumps({**GOOD, "answers": 3}), "answers 3, expected 1"),
    (json.dumps({**GOOD, "policy": "b"}), "policy 'b', expected 'a'"),
]


@pytest.mark.parametrize("text, problem", DAMAGED, ids=[problem.split(" ")[0] + str(k) for k, (_, problem) in enumerate(DAMAGED)])
def test_a_damaged_run_record_is_one_line_naming_it(capsys, comparison, text, problem):
    record = next((comparison / "search" / "a").glob("i*-s0")) / "record.json"
    record.write_text(text)
    before = snapshot(comparison)
    line = refused(capsys, *TASK, "--out", str(comparison), "--resume")
    assert line.startswith(f"error: {record}: damaged run record (") and problem in line and line.count("\n") == 1
    assert f"delete {record.parent} and run the same evo compare command with --resume" in line
    assert snapshot(comparison) == before


def test_a_resume_with_the_same_arguments_reruns_only_a_missing_run(comparison):
    first = json.loads((comparison / "compare.json").read_text())
    kept = next((comparison / "search" / "a").glob("i*-s0")) / "record.json"
    stamp = kept.stat().st_mtime_ns
    shutil.rmtree(next((comparison / "search" / "b").glob("i*-s0")))
    done = evo(*TASK, "--out", str(comparison), "--resume")
    assert done.returncode == 0, done.stderr
    assert json.loads((comparison / "compare.json").read_text())["search"] == first["search"]
    assert kept.stat().st_mtime_ns == stamp and "nan" not in (comparison / "compare.md").read_text()


def test_a_record_past_four_objectives_has_nan_hypervolume_and_is_whole():
    protocol = search.SearchProtocol(programs=4)
    identity = {"instance": 1, "seed": 0, "policy": "a", "answers": 1}
    assert search.record_problem(GOOD, identity, protocol) == ""
    assert search.record_problem({**GOOD, "hypervolume": [math.nan] * 8}, identity, protocol) == ""
