import itertools
import json
import subprocess
import sys

import numpy as np
import pytest

from evo.compare import pools, search, summary
from evo.policies.base import Completion

WEIGHTS = np.ones(2)


def brute_best_at_k(scalars, k):
    return np.mean([max(c) for c in itertools.combinations(scalars, k)])


def brute_pass_at_k(correct, k):
    return np.mean([any(c) for c in itertools.combinations(correct, k)])


def test_per_instance_matches_brute_force():
    rng = np.random.default_rng(0)
    vectors = rng.integers(0, 3, size=(3, 6, 2)) / 2.0
    optimum = np.array([1.0, 0.75, 0.5])
    columns = summary.per_instance(vectors, WEIGHTS, optimum, ks=(1, 2, 6))
    scalars = vectors.mean(axis=2)
    for i in range(3):
        for k in (1, 2, 6):
            assert columns[f"best@{k}"][i] == pytest.approx(brute_best_at_k(scalars[i], k))
            assert columns[f"pass@{k}"][i] == pytest.approx(brute_pass_at_k(scalars[i] >= optimum[i], k))
        pairs = [np.abs(a - b).sum() for a, b in itertools.combinations(vectors[i], 2)]
        assert columns["diversity"][i] == pytest.approx(np.mean(pairs))
        assert columns["valid"][i] == pytest.approx(vectors[i].any(axis=1).mean())


def test_table_reports_paired_difference_against_the_baseline():
    a = {"best@1": np.array([0.1, 0.2, 0.3, 0.4])}
    b = {"best@1": np.array([0.3, 0.4, 0.5, 0.6])}
    rows = summary.table({"a": a, "b": b}, baseline="a")
    assert "vs_baseline" not in rows["a"]["best@1"]
    assert rows["b"]["best@1"]["vs_baseline"]["difference"] == pytest.approx(0.2)
    assert rows["b"]["best@1"]["mean"] == pytest.approx(0.45)
    assert "| best@1 |" in summary.markdown(rows, "a", 4)


class Scripted:
    """A policy that answers from a fixed list (records the budget it was asked for)."""

    def __init__(self, texts):
        self.texts, self.calls = texts, []

    def generate(self, prompts, *, n=1, max_new_tokens=256, temperature=1.0, top_p=1.0, seed=None, stop=()):
        self.calls.append((len(prompts), n))
        return [[Completion(text, tuple(range(len(text)))) for text in (self.texts[j % len(self.texts)] for j in range(n))]
                for _ in prompts]


def test_sample_pool_matches_budgets_and_scores_sets():
    import tasks

    task = tasks.get("maze")
    instance = task.instances("test", 1, seed=3)[0]
    rng = np.random.default_rng(0)
    routes = [task.demonstrations(instance, 1, rng) for _ in range(3)]
    single = Scripted(routes)
    sampling = pools.Sampling(pool=6, batch=4)
    one = pools.sample_pool(single, task, [instance], 1, sampling)
    assert one.shape == (1, 6, 4) and single.calls == [(1, 6)]
    three = Scripted(["|".join(routes), "garbage"])
    tokens: list = []
    sets = pools.sample_pool(three, task, [instance], 3, sampling, tokens=tokens)
    assert sets.shape == (1, 6, 4) and three.calls == [(1, 2)]
    assert tokens == [(len("|".join(routes)) + len("garbage")) / 6]  # two completions' tokens over six candidates
    assert not sets[0, 3:].any()  # the unparseable completion scores three zero rows
    assert sets[0, :3, 0].max() == 1.0  # demonstrations reach the exit


def test_goal_pools_ask_one_prompt_per_weighting_and_held_out_has_the_oracle():
    import tasks

    task = tasks.get("maze")
    mazes = pools.held_out(task, 2, seed=3)
    assert len(mazes.instances) == 2 and len(mazes.fronts) == 2
    assert mazes.optimum[0] == task.oracle_best(mazes.instances[0])
    assert pools.held_out(task, 2, seed=3, fronts=False).fronts is None
    goals = np.random.default_rng(0).dirichlet(np.ones(4), size=(2, 3))
    policy = Scripted([task.demonstrations(mazes.instances[0], 1, np.random.default_rng(0))])
    vectors = pools.sample_pool(policy, task, mazes.instances, 1, pools.Sampling(pool=3, batch=2), goals=goals)
    assert vectors.shape == (2, 3, 4) and policy.calls == [(6, 1)]
    assert vectors[0].any(axis=1).all()  # maze 0's route answers every goal prompt of maze 0


def test_search_columns_and_the_paired_table_by_hand():
    # Records come from real run databases in the search tests below; here the arithmetic alone.
    runs = {"p": [{"best": [0.2, 0.5, 1.0], "hypervolume": [0.1, 0.3]}, {"best": [0.1, 0.1, 0.4], "hypervolume": [0.0, 0.2]}],
            "q": [{"best": [0.2, 0.2, 0.5], "hypervolume": [0.1, 0.1]}, {"best": [0.1, 0.4, 0.4], "hypervolume": [0.1, 0.1]}]}
    columns = search.columns(runs["p"])
    assert columns["success"].tolist() == [1.0, 0.0] and columns["final_best"].tolist() == [1.0, 0.4]
    np.testing.assert_allclose(columns["area_best"], [1.7 / 3, 0.6 / 3])
    assert columns["final_hypervolume"].tolist() == [0.3, 0.2]
    table = search.summary(runs, "q")
    assert table["p"]["final_best"]["vs_baseline"]["difference"] == pytest.approx(0.25)  # (0.5 + -0.1) / 2, paired by run
    assert "vs_baseline" not in table["q"]["success"]


def test_token_curves_step_at_each_iterations_tokens():
    runs = {"a": [{"best": [0.1, 0.2, 0.5, 0.6], "tokens": [10, 30], "programs_per_iteration": 2}],
            "b": [{"best": [0.3, 0.3, 0.3, 0.9], "tokens": [20, 40], "programs_per_iteration": 2}]}
    grid, curves = search.token_curves(runs, points=5)  # grid 0, 10, 20, 30, 40
    np.testing.assert_allclose(grid, [0, 10, 20, 30, 40])
    np.testing.assert_allclose(curves["a"][0], [0.1, 0.2, 0.2, 0.6, 0.6])  # after iteration 1 (10 tokens): 0.2
    np.testing.assert_allclose(curves["b"][0], [0.3, 0.3, 0.3, 0.3, 0.9])


def test_iterations_cover_the_program_budget():
    from evo.compare.spec_search import iterations_for

    assert iterations_for(240, 4, 1) == 60 and iterations_for(240, 4, 3) == 20 and iterations_for(100, 4, 3) == 9


def evo(*args, cwd):
    return subprocess.run([sys.executable, "-m", "evo", *args], capture_output=True, text=True, cwd=cwd, timeout=600)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--policy", "a=nope:x"], "unknown policy"),
        (["--policy", "a"], "expected NAME=VALUE"),
        (["--policy", "a=mutate:", "--k", "1,99"], "between 1 and the pool size"),
        (["--policy", "a=mutate:", "--answers", "a=4"], "not a multiple"),
        (["--policy", "a=mutate:", "--answers", "zz=3"], "not among the policies"),
        (["--policy", "a=local:/no/such/dir"], "no model directory"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(tmp_path, args, message):
    result = evo("compare", "--task", "maze", "--out", str(tmp_path / "c"), *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "c" / "compare.json").exists()


def test_search_instance_seed_picks_the_hard_instances(tmp_path):
    import tasks

    task = tasks.get("maze")
    rule = search.SearchProtocol(instances=2, instance_seed=777, pool=0)
    first, seen = search.hard_instances(task, rule, tmp_path / "a")
    again, _ = search.hard_instances(task, rule, tmp_path / "b")
    other, _ = search.hard_instances(task, search.SearchProtocol(instances=2, instance_seed=778, pool=0), tmp_path / "c")
    assert len(first) == len(other) == 2
    assert [i.data for i in first] == [i.data for i in again]
    assert all(i.data != j.data for i in first for j in other)
    assert {i.index for i in first}.isdisjoint(seen["initial_optimal"])


def test_hard_below_counts_a_pool_near_the_optimum_as_reaching_it():
    """A pool whose best is a constant's score reaches the optimum only as a fraction of it."""
    import tasks
    from evo.compare.pools import Contender
    from evo.scores import scalarize

    task = tasks.get("symreg")
    instance = task.instances("test", 1, seed=5)[0]
    constant = Scripted(["0.5"])
    near = float(scalarize(task.score(instance, ["0.5"]), task.weights)[0]) / task.oracle_best(instance)
    assert 0 < near < 1
    reach = [search.pools_reach(task, [instance], [Contender("c", "c", 1)], {"c": constant}, 2, 0, fraction)[0]
             for fraction in (1.0, near + 1e-6, near - 1e-3)]
    assert reach == [False, False, True]


@pytest.mark.slow
def test_hard_rule_drops_instances_a_pool_solves(tmp_path):
    """A trained model's pool of 30 reaches the optimum on some easy mazes: those are dropped; a
    policy whose answers are never valid drops none, so the first rule alone decides."""
    import tasks
    from evo import policies
    from evo.compare.pools import Contender

    task = tasks.get("maze")
    # a scan whose easy mazes the pool solves often (3 of the 8 scanned), so the check does not
    # hang on one lucky draw
    rule = search.SearchProtocol(instances=3, instance_seed=779, pool=30)
    solver = Contender("vpo", "local:maze-vpo", 3)
    chosen, seen = search.hard_instances(task, rule, tmp_path / "a", [solver], {"vpo": policies.load(solver.uri)})
    assert seen["pool_reached"] and {i.index for i in chosen}.isdisjoint(seen["pool_reached"])
    assert set(seen["pool_reached"]) <= set(seen["scanned"]) and len(chosen) == 3
    blind = Scripted(["a0"])
    kept, none = search.hard_instances(task, rule, tmp_path / "b", [Contender("b", "b", 1)], {"b": blind})
    plain, _ = search.hard_instances(task, search.SearchProtocol(instances=3, instance_seed=779, pool=0), tmp_path / "c")
    assert none["pool_reached"] == [] and [i.index for i in kept] == [i.index for i in plain]


@pytest.mark.slow
def test_compare_end_to_end_with_a_tiny_model(tmp_path):
    import torch

    from training import tiny

    torch.manual_seed(0)
    tokenizer = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tokenizer), tokenizer, tmp_path / "m")
    uri = f"local:{tmp_path / 'm'}"
    out = tmp_path / "cmp"
    result = evo("compare", "--task", "maze", "--policy", f"one={uri}", "--policy", f"set={uri}", "--answers", "set=3",
                 "--instances", "3", "--pool", "6", "--k", "1,6", "--search-instances", "1", "--search-seeds", "1",
                 "--search-programs", "24", "--search-pool", "0", "--search-instance-seed", "5", "--out", str(out), "--json",
                 "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(data["sampling"]) == {"one", "set"} and data["policies"]["set"]["answers"] == 3
    assert set(data["sampling"]["one"]) >= {"best@1", "best@6", "pass@1", "diversity", "pareto_fraction", "tokens"}
    assert 0 < data["sampling"]["one"]["tokens"]["mean"] <= 64 + 8  # the tiny model's tokens per route, within its budget
    assert data["sampling"]["set"]["tokens"]["mean"] <= (3 * 64 + 8) / 3
    assert set(data["search"]["set"]) == {"success", "final_best", "area_best", "final_hypervolume"}
    assert data["settings"]["search"] == {"instances": 1, "seeds": 1, "programs": 24, "instance_seed": 5, "pool": 0,
                                          "hard_below": 1.0, "points": 8, "scan": 20}
    records = {p.parent.parent.name: json.loads(p.read_text()) for p in (out / "search").glob("*/*/record.json")}
    assert records["one"]["iterations"] == 6 and records["set"]["iterations"] == 2  # 4 replies of 1 or of 3 programs
    assert len(records["one"]["best"]) == len(records["set"]["best"]) == 24  # the same budget in programs
    assert len(records["set"]["tokens"]) == 2 and records["set"]["tokens"][-1] > 0
    for record in records.values():  # distinct evaluations and the best worst objective, after each program
        distinct, floor = np.array(record["distinct"]), np.array(record["floor"])
        assert len(distinct) == len(floor) == 24 and (np.diff(distinct) >= 0).all() and distinct[-1] <= 24
        assert (np.diff(floor) >= 0).all() and (floor <= np.array(record["best"]) + 1e-9).all()
    assert (out / "compare.md").read_text().startswith("# evo compare: maze")
    again = evo("compare", "--task", "maze", "--policy", f"one={uri}", "--out", str(out), cwd=tmp_path)
    assert again.returncode == 2 and "already holds a comparison" in again.stderr and "--resume" in again.stderr
    # a stopped comparison: one run finished, one cut off before its record; --resume runs only the second
    (out / "compare.json").unlink()
    kept = next((out / "search" / "one").glob("i*-s0"))
    (out / "search" / "set" / kept.name / "record.json").unlink()
    stamp = (kept / "record.json").stat().st_mtime_ns
    args = [a for a in result.args[3:]]
    resumed = evo(*args, "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["search"] == data["search"]
    assert (kept / "record.json").stat().st_mtime_ns == stamp


def test_a_checkpoints_trained_budget_per_answer_is_read_from_its_training_config():
    from evo import policies

    assert policies.trained_tokens("local:maze-notes-grpo") == 100  # max_new_tokens 100, one answer
    assert policies.trained_tokens("local:maze-vpo") == 66  # 196 tokens for 3 routes, rounded up
    assert policies.trained_tokens("local:maze-warmup") is None  # no train_config.json
    assert policies.trained_tokens("mutate:") is None
    assert pools.answer_budget([None, 100, 66]) == 100 and pools.answer_budget([None]) == pools.FALLBACK_TOKENS == 64
    (line,) = pools.budget_warnings(66, {"warmup": None, "grpo": 100, "vpo": 66})
    assert line.startswith("warning: grpo was trained to write answers of up to 100 tokens; --tokens-per-answer 66")


def test_every_policy_samples_at_the_largest_trained_budget_unless_told(tmp_path):
    """maze-notes answers (a route and its notes) were trained at 100 tokens; the old fixed default
    of 64 cut them. Left out, the budget is the largest trained one, for every policy alike; given
    below it, one warning line says whose answers it may cut."""
    args = ["compare", "--task", "maze-notes", "--policy", "warmup=local:maze-notes-warmup", "--policy",
            "grpo=local:maze-notes-grpo", "--instances", "2", "--pool", "2", "--k", "1", "--search-instances", "0",
            "--json", "--quiet"]
    result = evo(*args, "--out", str(tmp_path / "a"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data["settings"]["tokens_per_answer"] == 100
    assert data["sampling"]["grpo"]["tokens"]["mean"] > 0  # the pools' cost beside their quality
    assert json.loads((tmp_path / "a" / "settings.json").read_text())["--tokens-per-answer"] == 100
    assert "may cut" not in result.stderr
    told = evo(*args, "--tokens-per-answer", "64", "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert told.returncode == 0, told.stderr
    assert json.loads(told.stdout.strip().splitlines()[-1])["settings"]["tokens_per_answer"] == 64
    warned = [line for line in told.stderr.splitlines() if "may cut" in line]
    assert len(warned) == 1 and warned[0].startswith("warning: grpo was trained to write answers of up to 100 tokens")


def test_the_hard_rules_pools_are_sampled_at_the_comparisons_budget():
    """The hard rule's pools get the sampling stage's tokens per answer (before: always 64, which
    cut answers a policy was trained to write longer and made solved instances look hard)."""
    import tasks
    from evo.compare.pools import Contender

    task = tasks.get("symreg")
    instance = task.instances("test", 1, seed=5)[0]
    asked = []

    class Budgeted(Scripted):
        def generate(self, prompts, *, max_new_tokens=256, **options):
            asked.append(max_new_tokens)
            return super().generate(prompts, max_new_tokens=max_new_tokens, **options)

    search.pools_reach(task, [instance], [Contender("c", "c", 1)], {"c": Budgeted(["0.5"])}, 2, 0, tokens_per_answer=100)
    search.pools_reach(task, [instance], [Contender("c", "c", 3)], {"c": Budgeted(["0.5"])}, 3, 0)
    assert asked == [100 + 8, 3 * pools.FALLBACK_TOKENS + 8]


def test_search_runs_propose_programs_at_the_comparisons_budget(tmp_path):
    """The search half's runs ask for `tokens_per_answer` tokens a program (m programs: m times
    it), as the sampling pools; before, the loop's own default, 4096 a program, which an
    instruct model that does not stop spends in full."""
    import tasks
    from evo.compare.pools import Contender

    task = tasks.get("symreg")
    instance = task.instances("test", 1, seed=5)[0]
    rule = search.SearchProtocol(instances=1, seeds=1, programs=12, pool=0)
    for answers, budget in ((1, 100), (3, 40)):
        asked: list[int] = []

        class Budgeted(Scripted):
            def generate(self, prompts, *, max_new_tokens=256, **options):
                asked.append(max_new_tokens)
                return super().generate(prompts, max_new_tokens=max_new_tokens, **options)

        record = search.run_one(task, instance, Contender("c", "mutate:", answers), Budgeted(["0.5"]), 0, rule,
                                tmp_path / f"m{answers}", tokens_per_answer=budget)
        assert len(record["best"]) == 12 and asked and set(asked) == {answers * budget}
