"""Several policies in one run: the choice (by weight, by UCB), the per-policy record, and
`evo run --policy NAME=URI ...` end to end with two real `mutate:` policies, a real sandbox
and a real SQLite run directory."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from evo.database.records import Program
from evo.errors import UserError
from evo.policy_mix import PolicyMix, PolicyStats, improved, policy_stats, ucb
from tests.openai_server import server  # noqa: F401  (the fixture)
from tests.test_run_cli import SCORER, evo, kill_mid_run, problem, show  # noqa: F401  (the fixture)

TWO = ("--policy", "small=mutate:", "--policy", "big=mutate:max_edits=5,scale=2")


def test_weights_choose_in_proportion_and_repeat_under_a_seed():
    mix = PolicyMix.of(["a", "b", "c"], {"a": 3.0, "c": 0.0})
    draws = [mix.choose(np.random.default_rng([7, i, 2])) for i in range(4000)]
    assert draws == [mix.choose(np.random.default_rng([7, i, 2])) for i in range(4000)]
    share = draws.count("a") / len(draws)
    assert abs(share - 0.75) < 0.03 and "c" not in draws and draws.count("b") > 0


def test_ucb_tries_every_policy_then_prefers_the_better_rate():
    names, weights = ("a", "b", "c"), (1.0, 1.0, 0.0)
    assert ucb(names, weights, {}) == "a"
    assert ucb(names, weights, {"a": PolicyStats(proposals=8)}) == "b"  # untried first; weight 0 never
    good, bad = PolicyStats(proposals=100, improvements=30), PolicyStats(proposals=100, improvements=1)
    assert ucb(names, weights, {"a": bad, "b": good}) == "b"
    assert ucb(names, weights, {"a": PolicyStats(proposals=5, improvements=0), "b": PolicyStats(proposals=500, improvements=10)}) == "a"


def test_bad_mixes_are_one_line_user_errors():
    with pytest.raises(UserError, match="not among the policies"):
        PolicyMix.of(["a"], {"zzz": 1.0})
    with pytest.raises(UserError, match="positive weight"):
        PolicyMix.of(["a", "b"], {"a": 0, "b": 0})
    with pytest.raises(UserError, match="policy_choice"):
        PolicyMix.of(["a"], {}, "thompson")
    with pytest.raises(UserError, match="finite sum"):  # each finite, their sum not: no probabilities
        PolicyMix.of(["a", "b"], {"a": 1e308, "b": 1e308})


def test_weights_are_checked_by_what_they_are_used_for(tmp_path):
    from evo.database import SearchSettings
    from evo.spec import SpecError, build

    with pytest.raises(UserError, match="finite sum"):
        SearchSettings(policy_weights={"a": 1e308, "b": 1e308})
    (tmp_path / "initial.py").write_text("x = 1\n")
    (tmp_path / "score.py").write_text("def evaluate(path):\n    return [1.0, 1.0]\n")
    raw = {"problem": {"program": "initial.py", "scorer": "score.py:evaluate", "objectives": ["fa", "fb"],
                       "weights": [1e308, 1e308]}}
    with pytest.raises(SpecError, match="weights"):
        build(raw, tmp_path / "problem.toml")


def record(id: int, policy: str, scalar: float | None, parents=(), **extra) -> Program:
    failed = scalar is None
    return Program(id, "x", "h", "n", 0, 0, None if failed else np.array([scalar]), scalar, parents=parents, policy=policy,
                   failure_kind="exception" if failed else None, **extra)


def test_policy_stats_count_proposals_failures_and_improvements():
    programs = {p.id: p for p in [
        record(1, "initial", 0.5),
        record(2, "a", 0.7, (1,)), record(3, "a", 0.4, (1,)), record(4, "b", None, (1,)),
        record(5, "b", 0.6, (2, 3)),  # below its best parent (0.7)
        record(6, "b", 0.9, (2,), origin="migrant", source=2),  # a copy: not a proposal
    ]}
    statuses = [("a", "pending", 2), ("a", "duplicate", 3), ("b", "pending", 2), ("b", "parse", 1)]
    stats = policy_stats(statuses, programs)
    assert set(stats) == {"a", "b"}
    assert stats["a"] == PolicyStats(proposals=5, replies=5, duplicates=3, evaluated=2, failures=0, improvements=1)
    assert stats["b"] == PolicyStats(proposals=3, replies=3, unparseable=1, evaluated=2, failures=1, improvements=0)
    sets = policy_stats(statuses, programs, replies={"a": 2, "b": 1})  # set replies: several programs each
    assert (sets["a"].replies, sets["a"].proposals, sets["b"].replies, sets["b"].proposals) == (2, 5, 1, 3)
    assert improved(programs[2], programs) and not improved(programs[4], programs)
    # a policy may be named "initial": its children have parents, the initial program has none
    named = {p.id: p for p in [record(1, "initial", 0.5), record(2, "initial", 0.7, (1,)), record(3, "initial", None, (1,))]}
    assert policy_stats([("initial", "pending", 2)], named)["initial"] == PolicyStats(
        proposals=2, replies=2, evaluated=2, failures=1, improvements=1)
    # a journal from before policies were recorded belongs to the run's one policy
    old = policy_stats([("", "pending", 2)], {p.id: p for p in programs.values() if p.policy in ("a", "initial")})
    assert old["a"].proposals == 2 and "" not in old


def policies_of(directory: Path) -> list[tuple]:
    db = sqlite3.connect(directory / "programs.sqlite")
    rows = db.execute("SELECT c.iteration, c.slot, c.policy, c.hash, p.policy FROM candidates c LEFT JOIN programs p "
                      "ON c.status = 'pending' AND p.iteration = c.iteration AND p.origin = 'evaluated' AND p.norm_hash = c.hash "
                      "ORDER BY c.iteration, c.slot").fetchall()
    db.close()
    return rows


@pytest.mark.parametrize("choice", ["weights", "ucb"])
def test_two_policies_in_one_run_are_recorded_deterministic_and_resumable(problem, tmp_path, choice):
    runs = {}
    for name in ("once", "again"):
        out = tmp_path / name
        result = evo("run", str(problem), *TWO, "--policy-choice", choice, "--iterations", "12",
                     "--seed", "4", "--batch", "2", "--out", str(out), "--quiet")
        assert result.returncode == 0, result.stderr
        runs[name] = policies_of(out)
    assert runs["once"] == runs["again"]
    rows = runs["once"]
    assert {r[2] for r in rows} == {"small", "big"}  # both were asked
    assert all(stored is None or stored == asked for _, _, asked, _, stored in rows)  # each program names its policy
    data = show(tmp_path / "once")
    policies = data["policies"]
    assert set(policies) == {"small", "big"}
    assert sum(s["proposals"] for s in policies.values()) == 12 * 2
    assert sum(s["evaluated"] for s in policies.values()) == data["programs"] - 1  # all but the initial program
    assert sum(s["failures"] for s in policies.values()) == data["failures"]
    text = evo("show", str(tmp_path / "once"))
    assert "policy small:" in text.stdout and "improvements" in text.stdout
    assert json.loads((tmp_path / "once" / "run.json").read_text())["policies"] == {
        "small": "mutate:", "big": "mutate:max_edits=5,scale=2"}
    longer = evo("run", "--resume", str(tmp_path / "once"), "--iterations", "16", "--quiet")
    assert longer.returncode == 0, longer.stderr
    assert policies_of(tmp_path / "once")[: len(rows)] == rows
    assert sum(s["proposals"] for s in show(tmp_path / "once")["policies"].values()) == 16 * 2


@pytest.mark.slow
def test_a_killed_ucb_run_resumes_into_the_run_never_killed(problem, tmp_path):
    (tmp_path / "score.py").write_text("DELAY = 0.004\n" + SCORER)
    budget = [*TWO, "--policy-choice", "ucb", "--iterations", "40", "--seed", "5", "--quiet"]
    reference = tmp_path / "reference"
    assert evo("run", str(problem), *budget, "--out", str(reference)).returncode == 0
    out = tmp_path / "killed"
    kill_mid_run(problem, budget, out, after=12, total=40)
    resumed = evo("run", "--resume", str(out))
    assert resumed.returncode == 0, resumed.stderr
    assert policies_of(out) == policies_of(reference)
    assert show(out)["policies"] == show(reference)["policies"]


def test_a_zero_weight_policy_is_never_asked(problem, tmp_path):
    out = tmp_path / "run"
    result = evo("run", str(problem), *TWO, "--set", "search.policy_weights={big = 0}", "--iterations", "6",
                 "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    assert {r[2] for r in policies_of(out)} == {"small"}
    assert show(out)["policies"]["big"] == PolicyStats().as_dict()  # listed, never asked


@pytest.mark.parametrize("args, message", [
    (["--set", "search.policy_weights={huge = 1}"], "not among the policies"),
    (["--policy-weights", "{small = -1}"], "policy_weights"),
    (["--policy-choice", "thompson"], "policy_choice"),
    (["--policy", "small=mutate:"], "given twice"),
    (["--policy", "=mutate:"], "expected NAME=VALUE"),
    (["--policy-weights", "{small = 1e308, big = 1e308}"], "finite sum"),
    (["--set", "problem.weights=[1e308, 1e308]"], "weights"),
])
def test_bad_policy_settings_are_one_line_exit_2(problem, tmp_path, args, message):
    result = evo("run", str(problem), *TWO, *args, "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_bare_uri_is_stored_as_before(problem, tmp_path):
    out = tmp_path / "run"
    result = evo("run", str(problem), "--policy", "mutate:max_edits=2", "--iterations", "2", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    settings = json.loads((out / "run.json").read_text())
    assert settings["policy"] == "mutate:max_edits=2" and settings["policies"] == {}
    stats = show(out)["policies"]
    assert set(stats) == {"mutate:max_edits=2"} and stats["mutate:max_edits=2"]["proposals"] == 2 * 2
    # a run directory written before policies were named or journaled resumes, and counts as before
    del settings["policies"]
    (out / "run.json").write_text(json.dumps(settings))
    db = sqlite3.connect(out / "programs.sqlite")
    db.execute("ALTER TABLE candidates DROP COLUMN policy")
    db.commit()
    db.close()
    assert show(out)["policies"] == stats
    again = evo("run", "--resume", str(out), "--iterations", "4", "--quiet")
    assert again.returncode == 0, again.stderr
    assert show(out)["policies"]["mutate:max_edits=2"]["proposals"] == 4 * 2


def test_resume_moves_a_policy_to_a_new_address(problem, tmp_path):
    out = tmp_path / "run"
    assert evo("run", str(problem), *TWO, "--iterations", "6", "--seed", "2", "--out", str(out), "--quiet").returncode == 0
    before = show(out)["policies"]
    unknown = evo("run", "--resume", str(out), "--policy", "huge=mutate:")
    assert unknown.returncode == 2 and "no policy of that name" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1
    moved = evo("run", "--resume", str(out), "--policy", "big=mutate:max_edits=1", "--iterations", "10", "--quiet")
    assert moved.returncode == 0, moved.stderr
    settings = json.loads((out / "run.json").read_text())
    assert settings["policies"] == {"small": "mutate:", "big": "mutate:max_edits=1"}
    [change] = settings["history"]
    assert (change["policy"], change["from"], change["to"]) == ("big", "mutate:max_edits=5,scale=2", "mutate:max_edits=1")
    after = show(out)["policies"]
    assert set(after) == {"small", "big"} and sum(s["proposals"] for s in after.values()) == 10 * 2
    assert all(after[name]["proposals"] >= before[name]["proposals"] for name in before)
    bare = tmp_path / "bare"  # a run of one bare URI takes a bare URI and keeps its name
    assert evo("run", str(problem), "--policy", "mutate:", "--iterations", "2", "--out", str(bare), "--quiet").returncode == 0
    assert evo("run", "--resume", str(bare), "--policy", "mutate:max_edits=1", "--iterations", "4", "--quiet").returncode == 0
    assert json.loads((bare / "run.json").read_text())["policies"] == {"mutate:": "mutate:max_edits=1"}
    assert set(show(bare)["policies"]) == {"mutate:"} and show(bare)["policies"]["mutate:"]["proposals"] == 4 * 2


def test_a_policy_named_initial_is_counted_like_any_other(problem, tmp_path):
    out = tmp_path / "run"
    result = evo("run", str(problem), "--policy", "initial=mutate:", "--policy", "other=mutate:max_edits=5",
                 "--policy-choice", "ucb", "--iterations", "8", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    data = show(out)
    stats = data["policies"]
    assert sum(s["evaluated"] for s in stats.values()) == data["programs"] - 1  # all but the initial program
    assert stats["initial"]["evaluated"] > 0


def test_a_server_policy_and_mutate_in_one_run(server, problem, tmp_path):  # noqa: F811
    s = server()
    s.text = lambda i, prefix: ("```python\n# EVOLVE-BLOCK-START\n"
                                f"A = {3.0 - i}\nB = -1.0\nC = A * B + 1.0\n# EVOLVE-BLOCK-END\n```")
    out = tmp_path / "run"
    result = evo("run", str(problem), "--policy", f"llm=openai:{s.url}#tiny", "--policy", "mut=mutate:",
                 "--policy-choice", "ucb", "--iterations", "8", "--batch", "2", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    policies = show(out)["policies"]
    assert set(policies) == {"llm", "mut"} and s.posts == policies["llm"]["proposals"] // 2  # one request per prompt, 2 samples each
    assert policies["llm"]["improvements"] >= 1  # B = -1 is the best fb: it beats the initial program
    db = sqlite3.connect(out / "programs.sqlite")
    first = db.execute("SELECT policy FROM programs WHERE code LIKE '%B = -1.0%' ORDER BY id LIMIT 1").fetchone()
    db.close()
    assert first == ("llm",)  # the server's program came in through the server's policy (mutate: may build on it)
