"""The training task made from a problem spec: real sandbox, real SQLite database, nguyen7."""

from __future__ import annotations

import numpy as np
import pytest

from evo import spec as specs
from evo.database import DB_FILE, Database
from evo.policies.base import Completion
from training import search_signal
from training.rollouts import BatchScored
from training.spec_task import POLICY_NAME, SpecSource, SpecTask

SPEC = "examples/nguyen7/problem.toml"
EXACT = "```python\ndef f(x):\n    return np.log(x + 1.0) + np.log(x * x + 1.0)\n```"
HALF = "```python\ndef f(x):\n    return np.log(x + 1.0) * 2.0\n```"
RAISES = "```python\ndef f(x):\n    raise ValueError('no')\n```"


def open_task(out, **kwargs) -> SpecTask:
    spec = specs.load(SPEC).override({"sandbox.workers": 2})
    return SpecTask.open(spec, out, seed=0, prompts_per_step=2, **kwargs)


def test_a_steps_proposals_are_scored_in_the_sandbox_and_grow_the_database(tmp_path):
    with open_task(tmp_path) as task:
        assert isinstance(task, BatchScored) and task.objectives == ("r0", "r1", "r2")
        first = task.instances("train", 2)
        assert [i.index for i in first] == [0, 1] and task.instances("train", 1)[0].data.group == first[0].data.group
        assert "```python" in task.prompt(first[0]) and task.stop(first) == ()
        front = task.front(first)
        assert front.shape == (2, 1, 3) and np.all(front[:, 0] > 0.5)  # the initial program
        completions = [[Completion(EXACT), Completion("no code here")],
                       [Completion(RAISES), Completion(HALF, finish_reason="length")]]
        rewards, parsed, kinds = task.score_completions(first, completions)
        assert rewards.shape == (4, 1, 3) and parsed.tolist() == [True, False, True, True]
        assert kinds.tolist() == [search_signal.VALID, search_signal.UNPARSED, search_signal.FAILED, search_signal.CUT]
        np.testing.assert_allclose(rewards[0, 0], 1.0)  # the exact formula: RMSE 0 on every third
        assert (rewards[2] == rewards[3]).all()  # failed, truncated: the floor of their group
        assert all((rewards[row] < front[0].min(axis=0)).all() for row in (1, 2, 3))  # below F on every objective
        programs = {p.code.count("np.log(x + 1.0)"): p for p in task.db.evaluated(ok_only=False) if p.policy == POLICY_NAME}
        assert len(programs) == 2 and task.db.iteration == 2  # the exact and the truncated one; both iterations
        assert sum(p.policy == POLICY_NAME and not p.ok for p in task.db.evaluated(ok_only=False)) == 1  # the raising one
        second = task.instances("train", 2)
        assert [i.index for i in second] == [2, 3]
        np.testing.assert_allclose(task.front(second)[0, 0], 1.0)  # the front is now the exact program
        assert task.score(second[0], task.parse(second[0], HALF)).shape == (1, 3)


def test_from_run_copies_the_runs_database_and_leaves_it_as_it_was(tmp_path):
    run = tmp_path / "run"
    with open_task(run) as task:  # a database as `evo run` leaves it
        task.score_completions(task.instances("train", 2), [[Completion(HALF)], [Completion(EXACT)]])
    before = (run / DB_FILE).read_bytes()
    with open_task(tmp_path / "train", from_run=run) as task:
        assert len(task.db.evaluated()) == 3 and task.db.iteration == 2
        assert [i.index for i in task.instances("train", 2)] == [2, 3]
        task.score_completions(task.instances("train", 2), [[Completion(RAISES)], [Completion("nothing")]])
    assert (run / DB_FILE).read_bytes() == before
    with Database.open(tmp_path / "train") as db:
        assert db.iteration == 4


def test_source_round_trips_and_a_bad_run_is_one_line(tmp_path):
    source = SpecSource(str((tmp_path / "p.toml").resolve()), {"search.islands": 1}, None)
    source.save(tmp_path)
    assert SpecSource.read(tmp_path) == source and source.task_name.startswith("spec:")
    from evo.errors import UserError

    with pytest.raises(UserError, match="not a run directory"):
        open_task(tmp_path / "t", from_run=tmp_path / "nowhere")


class Scripted:
    """A sampler that answers every prompt with the same scripted completions (real token ids)."""

    def __init__(self, tokenizer, texts: list[str]) -> None:
        self.tokenizer, self.texts = tokenizer, texts

    def sample(self, prompt_ids, *, n, max_new_tokens, temperature=1.0, top_p=1.0, seed=None, stop=()):
        from training import tiny
        from training.engines import as_rollout

        assert n == len(self.texts)
        ids = [list(self.tokenizer(t, add_special_tokens=False).input_ids) + [tiny.EOS_ID] for t in self.texts]
        groups = [[Completion(t, tuple(i)) for t, i in zip(self.texts, ids)] for _ in prompt_ids]
        return as_rollout(prompt_ids, groups, tiny.PAD_ID)


@pytest.mark.slow
def test_the_trainer_scores_vpo_front_against_each_prompts_database_front(tmp_path):
    import torch

    from training import advantages, tiny, trainer
    from training.config import TrainConfig

    tok = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tok, context=2048), tok, tmp_path / "init")
    config = TrainConfig(task="spec:nguyen7", algo="vpo_front", init=str(tmp_path / "init"), out=str(tmp_path / "out"),
                         prompts=2, group=3, max_new_tokens=64, options={"K": 20})
    with open_task(tmp_path / "out") as task:
        state = trainer.setup(config, resume=False, task=task)
        state.sampler = Scripted(state.tokenizer, [EXACT, HALF, "no program"])
        front = task.evolution.front_at(task.evolution.generated)  # the initial program only
        rolls, adv = trainer.rollout(state)
        assert rolls.parse_failed[:, 2].all() and (rolls.rewards[0, 0] > 0.99).all()
        assert rolls.kinds[1].tolist() == [search_signal.DUPLICATE] * 2 + [search_signal.UNPARSED]  # prompt 0's programs again
        assert (rolls.rewards[:, 2] < rolls.rewards[:, 1]).all()  # unparseable: below HALF, and below a duplicate
        rng = trainer.seeds(config, 0)[2]
        expected = advantages.compute("vpo_front", rolls.rewards, weights=task.weights, rng=rng, K=20,
                                      front=np.stack([front, front]))
        np.testing.assert_allclose(adv, expected)
        plain = advantages.compute("vpo_front", rolls.rewards, weights=task.weights, rng=trainer.seeds(config, 0)[2], K=20)
        assert not np.allclose(adv, plain)  # the front mattered
        before = [p.detach().clone() for p in state.model.parameters()]
        trainer.update(state, rolls, adv)
        assert any(not torch.equal(a, b) for a, b in zip(before, state.model.parameters()))
        state.step += 1
        _, again = trainer.rollout(state)  # the exact program is on the front now: nothing improves on it
        assert np.array_equal(again, np.zeros((2, 3)))


def test_the_default_token_budget_is_what_the_search_gives_a_policy(tmp_path):
    """--max-new-tokens 0 on a spec: the spec's max_new_tokens, else the loop's own rule (a whole program)."""
    from evo.loop import auto_tokens

    with open_task(tmp_path / "a") as task:
        assert task.token_budget(None) == auto_tokens(task.evolution.ask().prompts) == 4096
    spec = specs.load(SPEC).override({"sandbox.workers": 2, "prompt.style": "continue"})
    with SpecTask.open(spec, tmp_path / "b", seed=0, prompts_per_step=2) as task:
        budget = task.token_budget(None)
        assert budget == auto_tokens(task.evolution.ask().prompts) and 64 < budget < 4096  # finish one block
