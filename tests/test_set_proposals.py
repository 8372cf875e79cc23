"""Set proposals: a policy reply holding m programs (evo/prompt_sets.py, evo/loop.py).

The prompt forms of every style, the split of a reply into m programs that fail alone, the
loop's candidates (slots, answers, duplicates within a set, the token budget), a checkpoint's
trained m, the `samples` way (m completions of one prompt), and m = 1 identical to the search
before set proposals existed (digests of runs made by commit 57b78e5).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evo import prompt_sets, prompts
from evo.database import Database, DatabaseConfig, SearchSettings
from evo.database.journal import DUPLICATE, PARSE_ERROR, PENDING
from evo.loop import Evolution, LoopConfig, run
from evo.policies import MAX_ANSWERS
from evo.policies.base import Completion
from evo.prompts import ParseFailure, Shown
from evo.sandbox.pool import Sandbox
from evo.spec import SandboxLimits
from tests.evo_cli import refused
from tests.test_pinned_runs import journal_digest as digest
from tests.test_loop import SCORER  # objectives fa, fb of the program's A and B
from tests.openai_server import server  # noqa: F401 -- the fixture

PROGRAM = "import math\n\n# EVOLVE-BLOCK-START\nA = 1.0\nB = 2.0\n# EVOLVE-BLOCK-END\n"
BASE = Shown(PROGRAM, 0.5, {"fa": 0.3, "fb": 0.5})
RNG = np.random.default_rng(0)


def block(a: float, b: float, fence: str = "```") -> str:
    return f"{fence}python\n# EVOLVE-BLOCK-START\nA = {a}\nB = {b}\n# EVOLVE-BLOCK-END\n{fence}"


def widened(style: str, m: int = 3, **options):
    one = prompts.build(style, [BASE], rng=np.random.default_rng(0), objectives=("fa", "fb"), **options)
    return prompt_sets.widen(one, m, objectives=("fa", "fb"), minimize=("fb",))


# -- prompt forms ------------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["full", "diff", "versions"])
def test_chat_styles_ask_for_m_programs_naming_the_objectives(style):
    one = prompts.build(style, [BASE], rng=np.random.default_rng(0), objectives=("fa", "fb"))
    three = widened(style)
    assert prompt_sets.widen(one, 1) is one  # m = 1: the one-answer prompt itself
    assert three.answers == 3 and prompt_sets.answers_asked(three.text, MAX_ANSWERS) == 3
    assert prompt_sets.answers_asked(one.text, MAX_ANSWERS) == 1
    assert "### Program k" in three.text and "fa, fb (lower is better)" in three.text
    assert three.text.startswith(one.text.rpartition("\n\n")[0])  # the same context: only the closing instruction differs
    assert prompts.fenced_code(three.text) == prompts.fenced_code(one.text)  # the parent stays the last fenced block


def test_full_reply_splits_into_programs_that_fail_alone():
    prompt = widened("full")
    reply = f"### Program 1\n{block(3.0, 2.0)}\n### Program 2\nno code here\n### Program 3\n{block(1.0, -1.0)}"
    first, second, third = prompt_sets.programs(prompt, reply)
    assert "A = 3.0" in first and first.startswith("import math")
    assert isinstance(second, ParseFailure) and "program 2 of 3" in str(second)
    assert "B = -1.0" in third
    short = prompt_sets.programs(prompt, f"### Program 1\n{block(3.0, 2.0)}")
    assert isinstance(short[1], ParseFailure) and "holds 1 of the 3" in str(short[1]) and isinstance(short[2], ParseFailure)
    cut = prompt_sets.programs(prompt, f"### Program 1\n{block(3.0, 2.0)}\n### Program 2\n```python\nA = 3", cut=True)
    assert isinstance(cut[0], str) and "cut off" in str(cut[1]) and "missing" in str(cut[2])


def test_a_heading_inside_code_does_not_split_a_program():
    prompt = widened("full", m=2)
    inner = "```python\n# EVOLVE-BLOCK-START\n# Program 2: not a heading here\nA = 2.0\nB = 2.0\n# EVOLVE-BLOCK-END\n```"
    first, second = prompt_sets.programs(prompt, f"### Program 1\n{inner}\n\n**Program 2**\n{block(1.0, 1.0)}")
    assert "# Program 2: not a heading here" in first and "A = 1.0" in second


def test_without_headings_each_fenced_block_is_a_program():
    found = prompt_sets.programs(widened("versions"), f"{block(3.0, 2.0)}\ntext\n{block(2.0, 2.0)}\n{block(1.0, 2.0)}")
    assert [("A = 3.0" in p, "A = 2.0" in p, "A = 1.0" in p) for p in found] == [(1, 0, 0), (0, 1, 0), (0, 0, 1)]


def test_diff_sections_each_edit_the_current_program():
    prompt = widened("diff", m=2)
    edit = "<<<<<<< SEARCH\nA = 1.0\n=======\nA = {}\n>>>>>>> REPLACE"
    first, second = prompt_sets.programs(prompt, f"### Program 1\n{edit.format(3.0)}\n### Program 2\n{edit.format(5.0)}")
    assert "A = 3.0" in first and "A = 5.0" in second and "A = 3.0" not in second


def test_continue_with_the_tasks_own_head_and_separator():
    base = Shown("routes 1 moves 9\n# EVOLVE-BLOCK-START\nabcd\n# EVOLVE-BLOCK-END\n", 0.1)
    one = prompts.build("continue", [base], rng=np.random.default_rng(1), stop=())
    prompt = prompt_sets.widen(one, 3, set_head="routes {answers} moves 9\n", separator="|")
    assert prompt.text == "routes 3 moves 9\n" + one.prefix and prompt.stop == one.stop
    first, second, third = prompt_sets.programs(prompt, "xy|efg|hi\n# EVOLVE-BLOCK-END\nrest")
    assert first.split("\n")[2] == one.prefix + "xy" and second.split("\n")[2] == "efg" and third.split("\n")[2] == "hi"
    empty = prompt_sets.programs(prompt, "xy||hi")
    assert isinstance(empty[1], ParseFailure) and "empty" in str(empty[1])


def test_continue_without_a_head_says_how_to_separate():
    base = Shown(PROGRAM, 0.1)
    one = prompts.build("continue", [base], rng=np.random.default_rng(1))
    prompt = prompt_sets.widen(one, 2)
    assert prompt.separator == "\n# EVOLVE-BLOCK-NEXT\n" and "2 different versions" in prompt.text
    first, second = prompt_sets.programs(prompt, "A = 5.0\nB = 1.0\n# EVOLVE-BLOCK-NEXT\nA = 7.0\nB = 1.0\n")
    assert "B = 1.0" in first and "A = 7.0" in second


# -- the loop ----------------------------------------------------------------------------------


@pytest.fixture
def sandbox(tmp_path):
    (tmp_path / "score.py").write_text(SCORER)
    with Sandbox(f"{tmp_path / 'score.py'}:evaluate", ["fa", "fb"], SandboxLimits(isolation="none")) as box:
        yield box


class Recording:
    def __init__(self, reply: str) -> None:
        self.reply, self.asked = reply, []

    def generate(self, prompts, *, n=1, **options):
        self.asked.append((list(prompts), n, options["max_new_tokens"]))
        return [[Completion(self.reply) for _ in range(n)] for _ in prompts]


def start(tmp_path, sandbox, config):
    db = Database.open(tmp_path / "run", DatabaseConfig(("fa", "fb"), search=SearchSettings(islands=1, selection="uniform")))
    db.add_initial(PROGRAM, sandbox.evaluate(PROGRAM))
    return Evolution(config, db), db


def test_each_program_of_a_reply_is_its_own_candidate(tmp_path, sandbox):
    reply = (f"### Program 1\n{block(3.0, 2.0)}\n### Program 2\n{block(3.0, 2.0)}\n### Program 3\nnothing\n"
             f"### Program 4\n{block(2.0, -1.0)}")
    policy = Recording(reply)
    config = LoopConfig(iterations=1, samples=2, batch=1, depth=1, answers=4, max_new_tokens=50, style="full")
    evolution, db = start(tmp_path, sandbox, config)
    evaluated = []

    class Counting:
        def submit(self, code):
            evaluated.append(code)
            from concurrent.futures import Future
            future = Future()
            future.set_result(sandbox.evaluate(code))
            return future

    progress = run(evolution, policy, Counting())
    rows = db.journal.candidates()
    assert [(c.slot, c.answer) for c in rows] == [(k, k % 4) for k in range(8)]
    assert [c.status for c in rows][:4] == ["inserted", DUPLICATE, PARSE_ERROR, "inserted"]  # a repeat in the set: once
    assert [c.status for c in rows][4:] == [DUPLICATE, DUPLICATE, PARSE_ERROR, DUPLICATE]
    assert len(evaluated) == 2 and progress.parse_errors == 2 and progress.duplicates == 4
    assert {c.parents for c in rows} == {rows[0].parents}  # same parents for every program of the call
    assert policy.asked[0][1:] == (2, 200)  # n = samples; the budget is m x the per-program budget
    assert db.journal.reply_counts() == {"": 2}


def test_samples_way_asks_one_answer_prompts_m_times_as_often(tmp_path, sandbox):
    policy = Recording(block(3.0, 2.0))
    config = LoopConfig(iterations=1, samples=2, batch=1, depth=1, answers=3, answers_by="samples", max_new_tokens=50)
    evolution, db = start(tmp_path, sandbox, config)
    group = evolution.ask()
    assert group.options["n"] == 6 and group.options["max_new_tokens"] == 50 and group.answers == 1
    assert prompt_sets.answers_asked(group.texts[0], MAX_ANSWERS) == 1
    candidates = evolution.tell(group, policy.generate(group.texts, **group.options))
    assert len(candidates) == 1 and len(db.journal.candidates()) == 6 and db.journal.reply_counts() == {"": 6}


def test_policies_of_a_run_get_their_own_m(tmp_path, sandbox):
    config = LoopConfig(iterations=4, samples=1, batch=1, depth=1, answers=1, policy_answers=(("sets", 3),))
    assert (config.asked("sets"), config.asked("other")) == ((3, 1), (1, 1))


def test_a_checkpoint_brings_the_m_it_was_trained_for():
    from evo.policies import answers_for, trained_answers

    assert trained_answers("local:maze-clusters-vpo") == 3 and trained_answers("local:maze-clusters-grpo") == 1
    assert trained_answers("local:maze-clusters-warmup") == 1 and trained_answers("mutate:") == 1
    assert answers_for("local:maze-clusters-vpo", 1) == 1 and answers_for("mutate:", 2) == 2


def test_a_checkpoint_brings_the_tokens_it_was_trained_to_write(tmp_path, sandbox):
    """A trained checkpoint is asked, per program, for what its train_config.json says it was
    trained to write (maze-clusters-vpo: 196 tokens for 3 routes, 66 a route), as it is asked
    for its m; the run's --max-new-tokens wins; an untrained one gets the loop's own default
    (before: 4096 a program for every policy, which a model trained to stop at its budget need
    not do). `evo run`'s loop settings bring it for every policy of the run."""
    from dataclasses import replace

    import tasks
    from evo import run_dir
    from evo.loop import RunOptions

    task = tasks.get("maze-clusters")
    spec = task.problem_spec(task.instances("test", 1, seed=11)[0], tmp_path / "maze")
    named = {"vpo": "local:maze-clusters-vpo", "warmup": "local:maze-clusters-warmup"}
    loop = run_dir.loop_config(run_dir.check_spec(spec, {}),
                               run_dir.new_config(spec, named, 0, tmp_path / "r", {}, RunOptions(), "process"))
    assert loop.policy_tokens == (("vpo", 66),)
    assert (loop.tokens_for("vpo", ()), loop.tokens_for("warmup", ())) == (66, 4096)
    assert replace(loop, max_new_tokens=40).tokens_for("vpo", ()) == 40
    config = LoopConfig(iterations=1, samples=2, batch=1, depth=1, answers=3, style="full", policy_tokens=(("", 20),))
    evolution, _ = start(tmp_path, sandbox, config)
    assert evolution.ask().options["max_new_tokens"] == 3 * 20  # m programs a reply: m times it


def test_spec_keys_are_checked_in_one_line(tmp_path, capsys):
    spec = Path("examples/nguyen7/problem.toml").resolve()
    message = refused(capsys, "run", str(spec), "--policy", "mutate:", "--answers-by", "both", "--out", str(tmp_path / "r"))
    assert "answers_by" in message and "'completion', 'samples'" in message
    (tmp_path / "head.txt").write_text("no field here\n")
    message = refused(capsys, "run", str(spec), "--policy", "mutate:", "--set", f"prompt.set_head={tmp_path / 'head.txt'}",
                      "--out", str(tmp_path / "r2"))
    assert "set_head" in message and "{answers}" in message
    assert not (tmp_path / "r").exists() and not (tmp_path / "r2").exists()


# -- m = 1 is the search as it was ------------------------------------------------------------


def evo_run(*args: str) -> None:
    from evo.cli import main

    try:
        main(["run", *args, "--quiet"])
    except SystemExit as stop:
        assert stop.code in (0, None)


@pytest.mark.slow
def test_one_answer_runs_are_the_runs_before_set_proposals(tmp_path):
    """Digests of the same runs made by commit 57b78e5 (before set proposals): mutate: on
    nguyen7 (full style), and the shipped VPO checkpoint on a maze asked for one route.
    (The nguyen7 digest was re-taken when mutate: lost its duplicate-statement edit, which
    changes its proposals; nothing else of the run changed. The maze digest was re-taken when the
    local sampler moved from an exponential race to inverse-CDF draws, which draw other tokens from
    the same distribution: with the old draw put back, the run still gives the old digest
    e8b97f2a...)"""
    import tasks

    evo_run("examples/nguyen7/problem.toml", "--policy", "mutate:", "--iterations", "6", "--seed", "3",
            "--out", str(tmp_path / "ng"), "--set", "sandbox.workers=1")
    assert digest(tmp_path / "ng") == "6f028b4559e290f28a2356128ebb9acd2df1857e282a12543710e43fa752c757"
    task = tasks.get("maze-clusters")
    spec = task.problem_spec(task.instances("test", 1, seed=11)[0], tmp_path / "maze")
    evo_run(str(spec), "--policy", "local:maze-clusters-vpo", "--iterations", "5", "--seed", "2", "--answers", "1",
            "--out", str(tmp_path / "mz"), "--threads", "1")
    assert digest(tmp_path / "mz") == "90de29e9e2470aad52f8574950e99dddf700b3832ab6f79624e258150087b904"


@pytest.mark.slow
def test_a_set_trained_checkpoint_searches_with_its_own_m_prompt(tmp_path):
    """The shipped VPO checkpoint (m = 3) on a maze spec: asked with the task's 3-route head, it
    writes routes that become three candidates per reply; `evo show` counts replies apart."""
    import tasks
    from evo.report.summary import summary

    task = tasks.get("maze-clusters")
    spec = task.problem_spec(task.instances("test", 1, seed=11)[0], tmp_path / "maze")
    assert "routes {answers} moves" in (spec.parent / "route.set.txt").read_text()
    evo_run(str(spec), "--policy", "local:maze-clusters-vpo", "--iterations", "4", "--out", str(tmp_path / "run"),
            "--threads", "1")
    with Database.open(tmp_path / "run", read_only=True) as db:
        rows = db.journal.candidates()
    assert len(rows) == 4 * 4 * 3 and {c.answer for c in rows} == {0, 1, 2}
    assert sum(c.status == PARSE_ERROR for c in rows) <= 6  # the model writes its trained format
    policies = summary(tmp_path / "run")["policies"]
    (stats,) = policies.values()
    assert stats["replies"] == 16 and stats["proposals"] == 48
    assert PENDING not in {c.status for c in rows}


# -- an OpenAI-compatible server answers set prompts on a spec that is not a maze -------------


def editing_server(server):
    """A real HTTP server that answers like a chat model asked for a set: it reads how many
    programs the prompt asks for and the current program, and writes that many edits of it
    (mutate:'s edits), each under its heading; usage counts words as tokens."""
    import random

    from evo.policies.mutate import mutate_program
    from evo.prompts import fence_for, fenced_code

    fake = server()
    rng = random.Random(0)

    def reply(body, i):
        prompt = body["messages"][0]["content"]
        edits = [mutate_program(fenced_code(prompt), rng) for _ in range(prompt_sets.answers_asked(prompt, MAX_ANSWERS))]
        return "\n\n".join(f"### Program {k + 1}\n{fence_for(e)}python\n{e}{fence_for(e)}" for k, e in enumerate(edits))

    fake.reply = reply
    fake.usage = lambda body, texts: {"prompt_tokens": len(body["messages"][0]["content"].split()),
                                      "completion_tokens": sum(len(t.split()) for t in texts)}
    return fake


@pytest.mark.slow
def test_an_openai_server_answers_a_set_prompt_on_nguyen7(tmp_path, server):
    """`evo run examples/nguyen7/problem.toml --policy 'openai:URL#MODEL;chat' --answers 3`
    (docs/search.md): each reply's three programs are three candidates; the server saw the set
    prompt; tokens per program are counted from the server's usage."""
    from evo.report.summary import summary
    from evo.policies.openai import OpenAIPolicy, parse_uri

    fake = editing_server(server)
    evo_run("examples/nguyen7/problem.toml", "--policy", f"openai:{fake.url}#tiny;chat", "--answers", "3",
            "--iterations", "4", "--out", str(tmp_path / "run"), "--set", "sandbox.workers=1")
    asked = [body["messages"][0]["content"] for body in fake.bodies]
    assert len(asked) == 4 and all(prompt_sets.answers_asked(text, MAX_ANSWERS) == 3 for text in asked)
    assert all("r0, r1, r2" in text and "### Program k" in text for text in asked)
    with Database.open(tmp_path / "run", read_only=True) as db:
        rows = db.journal.candidates()
    assert len(rows) == 4 * 4 * 3 and PARSE_ERROR not in {c.status for c in rows}
    (stats,) = summary(tmp_path / "run")["policies"].values()
    assert (stats["replies"], stats["proposals"]) == (16, 48) and stats["evaluated"] > 0
    policy = OpenAIPolicy(parse_uri(f"{fake.url}#tiny;chat"))
    policy.generate(["### Current program\n```python\nx = 1\n```\n\nReply with 3 different improved programs"], n=2)
    assert policy.usage["requests"] == 1 and policy.usage["prompt_tokens"] == 14 and policy.usage["completion_tokens"] > 0
