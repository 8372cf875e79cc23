"""evo.api.evolve: one call from a notebook, a function and a Python scorer, a real run."""

import re

import numpy as np
import pytest

from evo.api import evolve, program_text
from evo.errors import UserError, WorkFailed
from evo.sandbox import candidate


def target(x):
    a = 1.0
    b = 0.5
    return a * x + b


def score(path):
    f = candidate.load(path).target
    xs = np.linspace(-2, 2, 9)
    error = float(np.mean([abs(f(x) - (3.0 * x - 1.0)) for x in xs]))
    return {"fit": 1.0 / (1.0 + error), "error_size": error}


def test_evolve_a_function_with_a_python_scorer(tmp_path):
    with evolve(target, score, "mutate:", iterations=6, seed=1, minimize=["error_size"], directory=tmp_path / "run",
                islands=1, samples_per_prompt=2) as result:
        assert result.best is not None and result.top[0].id == result.best.id
        assert [p.scalar for p in result.top] == sorted((p.scalar for p in result.top), reverse=True)
        initial = result.database.get(1)
        assert initial.scores[1] < 0  # minimized: stored negated
        assert result.best.scalar >= initial.scalar and result.progress.iteration == 6
        assert "def target(x):" in result.best.code and "EVOLVE-BLOCK-START" in result.best.code
        assert result.database.config.objectives == ("fit", "error_size")  # found from the scorer's keys
    from evo.report.summary import summary

    shown = summary(tmp_path / "run")  # an ordinary run directory: evo show / evo report read it
    assert shown["best"]["id"] == result.best.id and shown["best"]["scores"]["error_size"] >= 0


def test_evolve_asks_for_sets_of_programs(tmp_path):
    with evolve(target, score, "mutate:", iterations=2, seed=1, directory=tmp_path / "run", islands=1,
                samples_per_prompt=2, answers=3) as result:
        rows = result.database.journal.candidates()
        assert [(c.slot, c.answer) for c in rows] == [(k % 6, k % 3) for k in range(12)]
        assert result.database.journal.reply_counts() == {"mutate:": 4}


def test_a_failing_initial_program_and_a_bad_setting_are_one_line_errors(tmp_path):
    with pytest.raises(WorkFailed, match="the initial program fails: exception"):
        evolve("def target(x):\n    raise ValueError('no')\n", score, objectives=["fit"], directory=tmp_path / "a")
    with pytest.raises(UserError, match="evolve\\(\\)"):
        evolve(target, score, no_such_setting=1, directory=tmp_path / "b")
    with pytest.raises(UserError, match="isolation 'none'"):
        evolve(target, score, isolation="process", directory=tmp_path / "c")


def test_a_scorer_that_raises_on_the_initial_program_is_the_documented_error(tmp_path):
    """Without objectives=, evolve asks the scorer for its keys first: a scorer that raises
    there (or reports an error) still gives WorkFailed with the evaluation's message."""
    def raises(path):
        raise RuntimeError(f"cannot score {path}")

    def reports(path):
        return {"fit": 0.0, "error": "the program printed nothing"}

    with pytest.raises(WorkFailed, match=r"^the initial program fails: exception: RuntimeError: cannot score .*candidate\.py"):
        evolve(target, raises, directory=tmp_path / "a")
    with pytest.raises(WorkFailed, match=r"^the initial program fails: exception: the scorer reported: the program printed nothing$"):
        evolve(target, reports, directory=tmp_path / "b")
    with pytest.raises(WorkFailed, match=r"^the initial program fails: exception: ValueError: no \(at candidate\.py:2\)$"):
        evolve("def target(x):\n    raise ValueError('no')\n", score, directory=tmp_path / "c")


def test_program_text_wraps_a_function_in_markers():
    text = program_text(target)
    assert text.startswith("# EVOLVE-BLOCK-START\ndef target(x):") and text.endswith("# EVOLVE-BLOCK-END\n")
    assert program_text("x = 1\n") == "x = 1\n"


SCORER_FILE = """
import re

import numpy as np
from evo.sandbox import candidate

def score(path):
    f = candidate.load(path).target
    return {"fit": 1.0 / (1.0 + float(np.mean([abs(f(x) - (3.0 * x - 1.0)) for x in np.linspace(-2, 2, 5)])))}
"""


def test_a_relative_scorer_file_is_found_from_the_callers_working_directory(tmp_path, monkeypatch):
    (tmp_path / "score.py").write_text(SCORER_FILE)
    monkeypatch.chdir(tmp_path)  # the docstring's form: "score.py:evaluate", relative
    with evolve(target, "score.py:score", objectives=["fit"], iterations=2, directory=tmp_path / "run", islands=1,
                samples_per_prompt=1, timeout=20.0) as result:
        assert result.best is not None and 0 < result.best.scalar <= 1  # evaluated in the sandbox
    with pytest.raises(UserError, match="no file .*nosuch.py"):
        evolve(target, "nosuch.py:score", objectives=["fit"], directory=tmp_path / "none")
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("settings, message", [
    ({"minimize": ["nosuch"]}, "minimize must be distinct names of objectives"),
    ({"minimize": ["fit", "fit"]}, "minimize must be distinct names of objectives"),
    ({"timeout": float("nan")}, "sandbox.timeout must be a finite number > 0"),
    ({"timeout": -1.0}, "sandbox.timeout must be a finite number > 0"),
    ({"timeout": 5.0}, "no time limit"),  # a Python function scorer runs in this process: refused, not ignored
    ({"isolation": "nosuch"}, "sandbox.isolation must be one of"),
])
def test_evolve_refuses_what_a_spec_refuses_before_anything_is_written(tmp_path, settings, message):
    with pytest.raises(UserError, match=re.escape(message)):
        evolve(target, score, objectives=["fit", "error_size"], directory=tmp_path / "run", **settings)
    assert not (tmp_path / "run").exists()


class Budgets:
    """A real policy that records the completion budget it is asked for."""

    def __init__(self, policy) -> None:
        self.policy, self.asked = policy, []

    def generate(self, prompts, **options):
        self.asked.append(options["max_new_tokens"])
        return self.policy.generate(prompts, **options)


def test_evolve_asks_a_trained_checkpoint_for_its_trained_budget_unless_told(tmp_path, monkeypatch):
    """maze-clusters-vpo was trained at 66 tokens a route and 3 routes a reply: evolve asks it for
    3 x 66 (before: 3 x 4096); max_new_tokens= is every program's budget; bad values are one line."""
    from evo import policies

    load, made = policies.load, []
    monkeypatch.setattr(policies, "load", lambda uri: made.append(Budgets(load(uri))) or made[-1])
    short = dict(iterations=1, islands=1, samples_per_prompt=1, minimize=["error_size"], style="continue")  # fits its context
    with evolve(target, score, "local:maze-clusters-vpo", directory=tmp_path / "a", **short):
        pass
    with evolve(target, score, "local:maze-clusters-vpo", directory=tmp_path / "b", max_new_tokens=10, **short):
        pass
    with evolve(target, score, "mutate:", iterations=1, directory=tmp_path / "c", islands=1, samples_per_prompt=1,
                minimize=["error_size"]):
        pass
    assert [b.asked for b in made] == [[3 * 66], [3 * 10], [4096]]
    for bad in (0, 2.5, True):
        with pytest.raises(UserError, match="max_new_tokens must be an integer >= 1"):
            evolve(target, score, max_new_tokens=bad, directory=tmp_path / "bad")
    assert not (tmp_path / "bad").exists()
