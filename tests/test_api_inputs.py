"""evo.api.evolve on what a notebook user can get wrong: a Python policy that breaks the Policy
contract, a bad `answers`, a program that is not valid text; and the orientation of the scores
it returns (minimized objectives are stored negated; real_values gives them as reported)."""

import re

import pytest

from evo import spec
from evo.api import evolve
from evo.commands.values import answers_pairs
from evo.database.config import SearchSettings
from evo.errors import UserError
from evo.policies import MAX_ANSWERS
from evo.policies.base import BadReplies, Completion
from evo.sandbox import candidate

PROGRAM = "def target(x):\n    return 2.0 * x + 1.0\n"


def score(path):
    f = candidate.load(path).target
    miss = abs(f(3.0) - 10.0)
    return {"fit": 1.0 / (1.0 + miss), "miss": miss}


def reply(k):
    return Completion(f"```python\ndef target(x):\n    return 3.0 * x + {k}.0\n```")


class Scripted:
    """A Python policy whose every call returns `make(prompts, n)`."""

    def __init__(self, make):
        self.make = make

    def generate(self, prompts, *, n=1, **options):
        return self.make(prompts, n)


BROKEN = {
    "None": lambda ps, n: None,
    "bytes": lambda ps, n: b"```python\nx = 1\n```",
    "a None per prompt": lambda ps, n: [None for _ in ps],
    "bytes per prompt": lambda ps, n: [b"x = 1" for _ in ps],
    "bytes completions": lambda ps, n: [[b"x = 1"] * n for _ in ps],
    "str completions": lambda ps, n: [["```python\nx = 1\n```"] * n for _ in ps],
    "a Completion of bytes": lambda ps, n: [[Completion(b"x = 1")] * n for _ in ps],
    "more completions than n": lambda ps, n: [[reply(k) for k in range(n + 2)] for _ in ps],
    "fewer completions than n": lambda ps, n: [[reply(k) for k in range(n - 1)] for _ in ps],
    "a list short": lambda ps, n: [[reply(k) for k in range(n)] for _ in ps[1:]],
}


@pytest.mark.parametrize("name", BROKEN)
def test_a_policy_breaking_the_contract_gets_one_error_saying_what_it_must_return(tmp_path, name):
    with pytest.raises(BadReplies) as info:
        evolve(PROGRAM, score, Scripted(BROKEN[name]), objectives=["fit"], iterations=3, samples_per_prompt=2,
               directory=tmp_path / "run", islands=1)
    error = info.value
    assert isinstance(error, TypeError) and isinstance(error, ValueError) and isinstance(error, UserError)
    message = str(error)
    assert "\n" not in message
    assert message.startswith("policy 'Scripted': generate() must return a list of one list per prompt, each of "
                              "exactly n Completion objects"), message


def test_a_policy_keeping_the_contract_runs(tmp_path):
    policy = Scripted(lambda ps, n: [[reply(k) for k in range(n)] for _ in ps])
    with evolve(PROGRAM, score, policy, objectives=["fit"], iterations=2, samples_per_prompt=2,
                directory=tmp_path / "run", islands=1) as result:
        assert result.progress.iteration == 2 and result.best.scalar == 1.0  # 3x + 1 is exact


@pytest.mark.parametrize("answers", ["3", 2.5, True, False, 10**30, -1, MAX_ANSWERS + 1, None])
def test_answers_must_be_an_integer_up_to_the_maximum(tmp_path, answers):
    with pytest.raises(UserError, match=re.escape(f"search.answers must be an integer in 0..{MAX_ANSWERS} "
                                                  f"(0: the policy's own), got {answers!r}")):
        evolve(PROGRAM, score, "mutate:", objectives=["fit"], answers=answers, directory=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_every_count_setting_must_be_an_integer():
    with pytest.raises(UserError, match=re.escape("search.iterations must be an integer >= 1, got '3'")):
        SearchSettings(iterations="3")
    assert SearchSettings(answers=MAX_ANSWERS).answers == MAX_ANSWERS


def test_the_spec_and_the_answers_flag_share_the_maximum(tmp_path):
    (tmp_path / "initial.py").write_text(PROGRAM)
    (tmp_path / "score.py").write_text("def evaluate(path):\n    return [1.0]\n")
    path = tmp_path / "spec.toml"
    path.write_text(f'[problem]\nprogram = "initial.py"\nscorer = "score.py:evaluate"\nobjectives = ["a"]\n'
                    f"[search]\nanswers = {MAX_ANSWERS + 1}\n")
    with pytest.raises(UserError, match=re.escape(f"[search] answers: expected an integer in 0..{MAX_ANSWERS}")):
        spec.load(path)
    with pytest.raises(UserError, match=re.escape(f"--answers p={MAX_ANSWERS + 1}: expected an integer in 1..{MAX_ANSWERS}")):
        answers_pairs((f"p={MAX_ANSWERS + 1}",), ["p"])
    assert answers_pairs((f"p={MAX_ANSWERS}",), ["p"]) == {"p": MAX_ANSWERS}


@pytest.mark.parametrize("objectives", [None, ["fit"]])
def test_a_lone_surrogate_in_the_program_is_one_clear_refusal(tmp_path, objectives):
    program = PROGRAM + "# caf\ud800\n"
    with pytest.raises(UserError, match=re.escape("the program is not valid text: a lone surrogate '\\ud800' at "
                                                  "line 3 (character 45)")):
        evolve(program, score, "mutate:", objectives=objectives, directory=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_scores_are_oriented_and_real_values_are_as_reported(tmp_path):
    with evolve(PROGRAM, score, "mutate:", minimize=["miss"], iterations=2, directory=tmp_path / "run",
                islands=1) as result:
        initial = result.database.get(1)
        assert list(initial.scores) == [0.25, -3.0]  # oriented: the minimized miss is stored negated
        assert result.real_values(initial) == {"fit": 0.25, "miss": 3.0}  # as the scorer reported them
