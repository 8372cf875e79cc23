"""`evo compare --spec`: the curves' arithmetic by hand, and the command on nguyen7 with `mutate:`."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from evo.compare import spec_search
from evo.compare.spec_search import RunVectors
from tests.evo_cli import refused

SPEC = "examples/nguyen7/problem.toml"


def test_best_so_far_hypervolume_and_success_by_hand():
    run = RunVectors(np.array([1, 1, 3, 9]), np.array([[0.2, 0.4], [0.5, 0.1], [0.6, 0.6], [0.9, 0.9]]))  # 9: past the budget
    best = spec_search.best_curve(run, np.ones(2), 4)
    np.testing.assert_allclose(best, [0.3, 0.3, 0.6, 0.6])
    # call 1: boxes 0.2 x 0.4 and 0.5 x 0.1 overlap in 0.2 x 0.1 -> 0.11; call 3: 0.6 x 0.6 covers both
    volume = spec_search.hypervolume_curve(run, np.zeros(2), 4)
    np.testing.assert_allclose(volume, [0.11, 0.11, 0.36, 0.36])
    columns = spec_search.columns(best[None], volume[None], target=0.5)
    assert columns["success"].tolist() == [1.0] and columns["final_best"].tolist() == [0.6]
    np.testing.assert_allclose(columns["mean_best_so_far"], [0.45])
    assert spec_search.programs_to_solve(best[None], 0.5) == 3 and spec_search.programs_to_solve(best[None], 0.9) is None
    np.testing.assert_allclose(spec_search.hypervolume_curve(run, np.zeros(2), 4, points=2), [0, 0.11, 0.11, 0.36])
    assert "success" not in spec_search.columns(best[None], None, target=None)


def test_reference_is_shared_and_below_the_worst_score():
    runs = [RunVectors(np.array([1]), np.array([[0.5, -2.0]])), RunVectors(np.array([1]), np.array([[-1.0, 3.0]]))]
    # objective 0: worst -1, range 1.5 -> -1.15; objective 1: worst -2, range 5 -> -2.5
    np.testing.assert_allclose(spec_search.reference_point(runs, 2), [-1.15, -2.5])
    np.testing.assert_allclose(spec_search.reference_point([RunVectors(np.array([1]), np.array([[0.0, 0.5]]))], 2), [-0.1, -0.1])
    best, volume, reference = spec_search.curves({"a": runs[:1], "b": runs[1:]}, np.ones(2), 2)
    assert set(best) == set(volume) == {"a", "b"} and volume["a"].shape == (1, 2)
    np.testing.assert_allclose(volume["a"][0], [1.65 * 0.5, 1.65 * 0.5])  # (0.5, -2) above (-1.15, -2.5)
    _, none, no_reference = spec_search.curves({"a": [RunVectors(np.array([1]), np.ones((1, 5)))]}, np.ones(5), 2)
    assert none == {} and no_reference is None  # more than four objectives: no hypervolume


@pytest.mark.slow
def test_compare_spec_command_pairs_seeds_and_reports_success(tmp_path):
    out = tmp_path / "cmp"
    args = [sys.executable, "-m", "evo", "compare", "--spec", SPEC, "--policy", "a=mutate:", "--policy", "b=mutate:",
            "--seeds", "2", "--programs", "12", "--set", "search.target=0.6", "--set", "sandbox.workers=1",
            "--out", str(out), "--json", "--quiet"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    rows = result["search"]
    assert rows["a"]["success"]["mean"] == 1.0 and result["median_programs_to_solve"] == {"a": 1.0, "b": 1.0}  # the initial program scores 0.69
    assert rows["b"]["final_best"]["vs_baseline"]["difference"] == 0.0  # the same seeded policy: equal runs, paired
    assert rows["a"]["final_hypervolume"]["mean"] > 0 and result["settings"]["hypervolume_reference"] == [-0.1, -0.1, -0.1]
    assert (out / "compare.md").exists() and (out / "curves.npz").exists() and (out / "search" / "b" / "s1" / "run.json").exists()
    assert all(name in rows["b"] for name in spec_search.OUTCOMES) and "| failed_share |" in (out / "compare.md").read_text()


@pytest.mark.slow
def test_every_policy_searches_at_the_largest_trained_budget_unless_told(tmp_path):
    """A trained checkpoint is searched at the tokens a program it was trained to write (the
    loop's default now), so a comparison gives every policy the largest of those, the untrained
    one included (before: evo run's 4096 a program for all); given, --tokens-per-answer is every
    run's budget, with one warning line for a policy trained to write longer. Left out, a shared
    budget below the initial program's length is one line for each policy it would cut."""
    import shutil

    import tasks
    from evo.policies import resolve_checkpoint

    task = tasks.get("maze-clusters")
    spec = task.problem_spec(task.instances("test", 1, seed=11)[0], tmp_path / "maze")
    base = [sys.executable, "-m", "evo", "compare", "--spec", str(spec), "--policy", "warmup=local:maze-clusters-warmup",
            "--policy", "vpo=local:maze-clusters-vpo", "--seeds", "2", "--programs", "12", "--json", "--quiet"]
    for given, budget in ((), 66), (("--tokens-per-answer", "30"), 30):
        out = tmp_path / f"cmp{budget}"
        done = subprocess.run([*base, *given, "--out", str(out)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.strip().splitlines()[-1])["settings"]["tokens_per_answer"] == budget
        assert json.loads((out / "settings.json").read_text())["--tokens-per-answer"] == budget
        for name in ("warmup", "vpo"):
            assert json.loads((out / "search" / name / "s0" / "run.json").read_text())["loop"]["max_new_tokens"] == budget
        warned = [line for line in done.stderr.splitlines() if "may cut" in line]
        assert len(warned) == (1 if given else 0) and all(line.startswith("warning: vpo was trained") for line in warned)
        assert "tokens a program" not in done.stderr  # a route takes 20 tokens: room enough
    short = tmp_path / "short"  # maze-clusters-vpo, recorded as trained at 2 tokens a route: every policy's budget
    shutil.copytree(resolve_checkpoint("maze-clusters-vpo"), short)
    record = json.loads((short / "train_config.json").read_text())
    (short / "train_config.json").write_text(json.dumps({**record, "max_new_tokens": 6}))
    done = subprocess.run([*base[:9], f"vpo=local:{short}", *base[10:], "--out", str(tmp_path / "short-cmp")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    cut = [line for line in done.stderr.splitlines() if "tokens a program" in line]  # before the runs, for both
    assert len(cut) == 2 and all("give --tokens-per-answer 104" in line for line in cut)
    assert cut[0].startswith("warning: local:maze-clusters-warmup is searched at 2 tokens a program, the largest any "
                             "compared policy was trained to write")
    assert cut[1].startswith(f"warning: local:{short} is searched at 2 tokens a program, the tokens it was trained to write")


def test_a_runs_proposals_are_counted_valid_failed_or_duplicate(nguyen7_run):
    from evo.database import Database

    run = spec_search.run_vectors(nguyen7_run)
    with Database.open(nguyen7_run, read_only=True) as db:
        counts = db.journal.counts()
    total = sum(counts.values())
    assert total > 0 and abs(sum(run.outcomes) - 1.0) < 1e-12
    assert run.outcomes == (counts["ok"] / total, (counts["failed"] + counts["parse"]) / total, counts["duplicate"] / total)
    columns = spec_search.outcome_columns([run, run])
    assert list(columns) == list(spec_search.OUTCOMES) and columns["valid_share"].tolist() == [run.outcomes[0]] * 2


def test_compare_takes_a_task_or_a_spec(capsys):
    assert "one of them" in refused(capsys, "compare", "--spec", SPEC, "--task", "maze", "--policy", "a=mutate:")
    assert "one of them" in refused(capsys, "compare", "--policy", "a=mutate:")
    assert "--set belongs to evo compare --spec" in refused(capsys, "compare", "--task", "maze", "--policy", "a=mutate:",
                                                            "--set", "search.islands=1")


def test_a_scorer_that_reports_valid_gets_its_own_row(nguyen7_run, tmp_path):
    """A maze spec scores a route into a wall as zeros with `valid` 0 rather than failing it, so
    `valid_share` (evaluated without failure) counts it; `scorer_valid_share` counts what the
    scorer called valid. A scorer without the extra (nguyen7's) gets no such row."""
    from evo.database import Database

    out = tmp_path / "maze"
    done = subprocess.run([sys.executable, "-m", "evo", "run", "examples/maze_evolution/problem.toml", "--policy",
                           "local:maze-warmup", "--iterations", "6", "--seed", "0", "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    run = spec_search.run_vectors(out)
    with Database.open(out, read_only=True) as db:
        total = sum(db.journal.counts().values())
        said = [e.extras["valid"] for e in db.journal.evaluations().values() if e.ok]
    assert said and run.scored_valid == sum(1 for v in said if v) / total
    columns = spec_search.outcome_columns([run])
    assert list(columns) == [*spec_search.OUTCOMES, spec_search.SCORED_VALID]
    assert columns[spec_search.SCORED_VALID][0] < columns["valid_share"][0]  # seeded: 0.458 of 0.625 (routes into walls)
    plain = spec_search.run_vectors(nguyen7_run)
    assert plain.scored_valid is None and spec_search.SCORED_VALID not in spec_search.outcome_columns([plain])
    # in one comparison every policy has the row or none does
    assert spec_search.outcome_columns([plain], scored=True)[spec_search.SCORED_VALID].tolist() == [0.0]
