"""What a search proposal earns (training/search_signal.py): one rule for `evo train --spec` and
`evo run --train`, failures never above a valid program, duplicates by a named rule, and a
training that has nothing to learn says so. Real sandbox, real SQLite, real spec files."""

from __future__ import annotations

import numpy as np
import pytest

from evo import spec as specs
from evo.database.journal import CandidateJournal
from evo.policies.base import Completion
from training import advantages, search_signal
from training.search_signal import CUT, DUPLICATE, FAILED, UNPARSED, VALID, Proposals
from training.spec_task import SpecTask

NGUYEN7 = "examples/nguyen7/problem.toml"
EXACT = "```python\ndef f(x):\n    return np.log(x + 1.0) + np.log(x * x + 1.0)\n```"
HALF = "```python\ndef f(x):\n    return np.log(x + 1.0) * 2.0\n```"
RAISES = "```python\ndef f(x):\n    raise ValueError('no')\n```"

SCORER = '''import runpy
from pathlib import Path


def evaluate(path):
    f = runpy.run_path(str(path))["f"]
    err, size = abs(f(1.0) - 2.0), float(len(Path(path).read_text()))
    return {SCORES}
'''


def own_spec(directory, *, minimize: bool):
    """A user's problem with two objectives to make small: stated with `minimize` (negated in the
    score vector), or as negative values to make large."""
    directory.mkdir()
    (directory / "initial.py").write_text("def f(x):\n    return x\n")
    scores = '{"err": err, "size": size}' if minimize else '{"err": -err - 1.0, "size": -size}'
    (directory / "score.py").write_text(SCORER.replace("{SCORES}", scores))
    lines = ['[problem]', 'name = "own"', 'program = "initial.py"', 'scorer = "score.py:evaluate"',
             'objectives = ["err", "size"]', *(['minimize = ["err", "size"]'] if minimize else []),
             '[sandbox]', 'isolation = "none"', '[search]', 'islands = 1', '[prompt]', 'style = "full"']
    (directory / "problem.toml").write_text("\n".join(lines) + "\n")
    return specs.load(directory / "problem.toml")


def program(body: str) -> Completion:
    return Completion(f"```python\ndef f(x):\n    {body}\n```")


@pytest.mark.parametrize("minimize", [True, False], ids=["minimize", "negative"])
def test_a_failure_earns_less_than_every_valid_program(tmp_path, minimize):
    """Today's main scored a failure as a zero vector: above every program whose objectives are
    minimized or negative (grpo advantages [-1.71, +0.85, +0.43, +0.43] for such a group)."""
    spec = own_spec(tmp_path / "spec", minimize=minimize)
    with SpecTask.open(spec, tmp_path / "out", seed=0, prompts_per_step=1) as task:
        instances = task.instances("train", 1)
        group = [[program("return x + 0.5"), program("return 2.0"), program("raise ValueError('no')"),
                  Completion("no program here")]]
        rewards, _, kinds = task.score_completions(instances, group)
        assert kinds.tolist() == [VALID, VALID, FAILED, UNPARSED]
        adv = advantages.compute("grpo", rewards.reshape(1, 4, 1, 2), weights=task.weights, rng=np.random.default_rng(0))[0]
        assert adv[1] > adv[0] > max(adv[2], adv[3])  # the exact f, then the closer one, then the failures
        assert adv[2] == adv[3] < 0
        front = task.front(instances)[0]
        assert (rewards[2, 0] < np.nanmin(front, axis=0)).all() and (rewards[2, 0] < rewards[:2, 0].min(axis=0)).all()
        gain = advantages.compute("vpo_front", rewards.reshape(1, 4, 1, 2), weights=task.weights,
                                  rng=np.random.default_rng(0), front=task.front(instances))[0]
        assert gain[2] == gain[3] == gain.min()  # no weighting prefers a failure


def rows_of(kinds: list[int], scores: list) -> Proposals:
    d = 2
    vectors = np.array([[np.nan] * d if s is None else s for s in scores], dtype=np.float64)
    return Proposals(np.array([kinds]), vectors[None], np.full((1, 0, d), np.nan))


def test_the_duplicate_rules():
    kinds = [VALID, VALID, DUPLICATE, FAILED]
    proposals = rows_of(kinds, [[-3.0, 1.0], [-1.0, 2.0], [-1.0, 2.0], None])  # the duplicate repeats the second
    by_rule = {rule: search_signal.rewards(proposals, rule)[0, :, 0] for rule in search_signal.DUPLICATE_RULES}
    low, gap = np.array([-3.0, 1.0]), np.array([2.0, 1.0])
    np.testing.assert_allclose(by_rule["worst"][3], low - gap)  # the floor: below every program by the group's spread
    penalty = by_rule["penalty"]
    assert (penalty[3] < penalty[2]).all() and (penalty[2] < penalty[:2].min(axis=0)).all()  # failure < repeat < valid
    np.testing.assert_allclose(by_rule["worst"][2], by_rule["worst"][3])
    np.testing.assert_allclose(by_rule["score"][2], [-1.0, 2.0])
    np.testing.assert_allclose(by_rule["zero"][2], [0.0, 0.0])  # the old evo run --train rule, kept by name
    assert search_signal.DEFAULT_DUPLICATES == "penalty" and search_signal.DEFAULT_FAILURES == "floor"
    old = search_signal.rewards(proposals, "zero", "zero")[0, :, 0]  # the zero-vector rules, by their names
    np.testing.assert_allclose(old[2:], 0.0)
    np.testing.assert_allclose(old[:2], [[-3.0, 1.0], [-1.0, 2.0]])
    np.testing.assert_allclose(search_signal.rewards(proposals, "worst", "zero")[0, 2:, 0], 0.0)  # worst: as a failure
    with pytest.raises(ValueError, match="duplicates must be one of"):
        search_signal.rewards(proposals, "free")
    with pytest.raises(ValueError, match="failures must be one of"):
        search_signal.rewards(proposals, "penalty", "free")


def test_the_floor_is_below_every_vector_whatever_the_signs(tmp_path):
    rng = np.random.default_rng(1)
    for _ in range(200):
        g, d = int(rng.integers(2, 6)), int(rng.integers(1, 4))
        kinds = rng.integers(0, len(search_signal.KINDS), size=(1, g))
        scores = rng.normal(scale=10.0 ** rng.integers(-3, 4), size=(1, g, d))
        scores[~np.isin(kinds, [VALID, DUPLICATE])] = np.nan
        front = rng.normal(size=(1, int(rng.integers(0, 3)), d))
        rewards = search_signal.rewards(Proposals(kinds, scores, front), "score")[0, :, 0]
        known = np.concatenate([scores[0][np.isfinite(scores[0]).all(axis=1)], front[0]])
        failed = np.isin(kinds[0], [FAILED, UNPARSED, CUT])
        if failed.any() and len(known):
            assert (rewards[failed] < known.min(axis=0)).all()


class Recorder:
    """An observer of the loop that keeps what it is told, as the online learner writes it."""

    def __init__(self) -> None:
        self.groups: list = []
        self.outcomes: dict = {}

    def asking(self, group) -> None:
        pass

    def told(self, told) -> None:
        self.groups.append(told)

    def committed(self, iterations) -> None:
        self.outcomes.update((c.iteration, c) for c in iterations)


def test_both_commands_give_the_same_rewards_for_the_same_proposals(tmp_path):
    """`evo train --spec` scores a step as the loop commits it; `evo run --train`'s learner writes
    what the loop tells it to RUN/online/ and reads it back: the same rewards, for every rule."""
    from training.online import proposals_of
    from training.online_files import GROUPS, OUTCOMES, Group, Outcome

    spec = specs.load(NGUYEN7).override({"sandbox.workers": 2})
    step = [[Completion(EXACT), Completion(EXACT), Completion(RAISES), Completion("no code")],
            [Completion(HALF, finish_reason="length"), Completion(EXACT), Completion(HALF), Completion(HALF)]]
    for rule, failures in [*((rule, "floor") for rule in search_signal.DUPLICATE_RULES), ("zero", "zero")]:
        out = tmp_path / f"{rule}-{failures}"
        with SpecTask.open(spec, out, seed=0, prompts_per_step=2, duplicates=rule, failures=failures) as task:
            task.score_completions(task.instances("train", 2), [[Completion(HALF)] * 4, [Completion("none")] * 4])
            recorder = Recorder()
            task.evolution.observers += (recorder,)
            instances = task.instances("train", 2)
            rewards, _, kinds = task.score_completions(instances, step)
            assert kinds.tolist() == [VALID, DUPLICATE, FAILED, UNPARSED, CUT, DUPLICATE, DUPLICATE, DUPLICATE]
            directory = tmp_path / f"online-{rule}-{failures}"
            (directory / GROUPS).mkdir(parents=True)
            (directory / OUTCOMES).mkdir()
            told = recorder.groups[0]
            for offset, row in enumerate(told.replies):
                completions = tuple((c.text, (3,), c.finish_reason) for c in row)
                Group(told.group.start, (1, 2), completions, told.front).write(directory, told.group.start + offset)
            for iteration, committed in recorder.outcomes.items():
                Outcome(*search_signal.outcome(committed.candidates, committed.evaluations, 4, 3)).write(directory, iteration)
            groups = [Group.read(directory, i, 10, 3, 4) for i in (2, 3)]
            outcomes = [Outcome.read(directory, i, 4, 3, len(search_signal.KINDS)) for i in (2, 3)]
            online = proposals_of(groups, outcomes, 1)
            np.testing.assert_array_equal(search_signal.rewards(online, rule, failures).reshape(-1, 1, 3), rewards)
            np.testing.assert_array_equal(online.fronts, task.front(instances))  # one front F
            journal = CandidateJournal(task.db.store)
            assert journal.next_iteration() == 4
            assert len(task.db.store.scores_before(0)) == 1 and len(task.db.store.scores_before(2)) == 2


def record(step: int, kinds: list[int], advantage: float) -> dict:
    return {"step": step, **search_signal.shares(np.array(kinds)), "advantage_abs": advantage}


@pytest.mark.parametrize("kinds, advantage, words", [
    ([FAILED, FAILED, UNPARSED, FAILED], 0.0, "all fail to evaluate: a model that can write this spec's program"),
    ([DUPLICATE, DUPLICATE, DUPLICATE, FAILED], 0.4, "all repeat programs the run already has"),
    ([VALID, VALID, VALID, VALID], 0.0, "zero advantage everywhere"),
])
def test_a_training_with_nothing_to_learn_is_named_after_k_steps(kinds, advantage, words):
    steps = [record(k, kinds, advantage) for k in (1, 2, 3)]
    assert search_signal.idle_cause(steps[:2], 3) == ""  # fewer than K steps
    line = search_signal.idle_cause(steps, 3)
    assert words in line and "\n" not in line and "in the last 3 training steps" in line
    assert search_signal.idle_cause(steps, 0) == ""  # 0: never
    learning = record(2, [VALID, FAILED, VALID, DUPLICATE], 0.8)
    assert search_signal.idle_cause([steps[0], learning, steps[2]], 3) == ""


def test_equal_scores_give_zero_advantage_and_count_as_flat():
    proposals = rows_of([VALID, VALID, DUPLICATE], [[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]])
    rewards = search_signal.rewards(proposals, "score")
    adv = advantages.compute("grpo", rewards, weights=np.ones(2), rng=np.random.default_rng(0))
    assert search_signal.step_cause(record(1, [VALID, VALID, DUPLICATE], float(np.abs(adv).mean()))) == "flat"


def test_a_repeat_of_the_initial_program_earns_its_stored_score_under_score(tmp_path):
    """The initial programs are not journaled: a duplicate of one finds its score among the stored programs."""
    from pathlib import Path

    spec = specs.load(NGUYEN7).override({"sandbox.workers": 1})
    initial = Path(NGUYEN7).with_name("initial.py").read_text()
    with SpecTask.open(spec, tmp_path, seed=0, prompts_per_step=1, duplicates="score") as task:
        front = task.evolution.front_at(task.evolution.generated)
        rewards, _, kinds = task.score_completions(task.instances("train", 1),
                                                   [[Completion(f"```python\n{initial}```"), Completion(HALF)]])
        assert kinds.tolist() == [DUPLICATE, VALID]
        np.testing.assert_allclose(rewards[0, 0], front[0])  # the initial program's own scores
        original = CandidateJournal(task.db.store).originals([task.db.dedupe_key(initial), "no such key"])
        assert list(original) == [task.db.dedupe_key(initial)] and original[task.db.dedupe_key(initial)].ok
