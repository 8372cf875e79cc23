"""Set replies keep their well-formed programs and stay bounded (evo/prompt_sets.py, evo/loop.py):
only real `Program k` headings split a reply (not prose, not a program's own comment); the
reply cap grows with the programs asked for; `mutate:` reads m only from the project's own
instruction line; an unparseable reply is journaled once per reply, not once per program."""

from __future__ import annotations

import time
from concurrent.futures import Future

import numpy as np
import pytest

from evo import prompt_sets, prompts, run_dir
from evo.database import Database, DatabaseConfig, SearchSettings
from evo.database.journal import PARSE_ERROR
from evo.loop import Evolution, LoopConfig, RunOptions, run
from evo.policies import MAX_ANSWERS
from evo.policies.base import Completion
from evo.policies.mutate import MutatePolicy
from evo.prompts import ParseFailure, Shown
from evo.report import summary, text
from tests.test_lost_programs import SPEC
from tests.test_set_proposals import PROGRAM, Recording, block, sandbox, widened  # noqa: F401 -- sandbox: the fixture


# -- only real headings split a reply ----------------------------------------------------------


def test_prose_naming_a_program_splits_nothing():
    prompt = widened("full", m=2)
    reply = ("Program 1 uses a larger A; Program 2 trades fa for fb.\n\n"
             f"### Program 1\nProgram 2 comes after this one.\n**Program 2** is the bolder one.\n{block(3.0, 2.0)}\n"
             f"**Program 2**\n{block(1.0, -1.0)}\n")
    first, second = prompt_sets.programs(prompt, reply)
    assert "A = 3.0" in first and "B = -1.0" in second


def test_a_programs_own_program_comment_outside_a_fence_stays_in_it():
    prompt = widened("diff", m=2)
    edit = "<<<<<<< SEARCH\nA = 1.0\n=======\n# Program {k}: a new A\nA = {a}\n>>>>>>> REPLACE"
    reply = (f"### Program 1\n{edit.format(k=1, a=3.0)}\n{edit.format(k=2, a=3.0).replace('A = 1.0', 'B = 2.0')}\n"
             f"### Program 2\n{edit.format(k=1, a=5.0)}")
    first, second = prompt_sets.programs(prompt, reply)
    assert not isinstance(first, ParseFailure) and not isinstance(second, ParseFailure), (first, second)
    assert "# Program 1: a new A\nA = 3.0" in first and "# Program 2: a new A" in first
    assert "# Program 1: a new A\nA = 5.0" in second


@pytest.mark.parametrize("heading", ["### Program 1", "## Program 1: larger A", "**Program 1**", "**Program 1:** larger A",
                                     "### **Program 1** (larger A)", "# Program 1", "   ### program 01"])
def test_the_heading_forms_a_model_writes_still_split(heading):
    prompt = widened("full", m=2)
    second = heading.replace("1", "2").replace("02", "2")
    found = prompt_sets.programs(prompt, f"{heading}\n{block(3.0, 2.0)}\n{second}\n{block(1.0, -1.0)}")
    assert "A = 3.0" in found[0] and "B = -1.0" in found[1]


def test_a_set_reply_with_14000_headings_is_m_candidates_quickly():
    prompt = widened("full", m=8)
    reply = "".join(f"### Program {k}\n{block(k, 1.0)}\n" for k in range(1, 14_001))
    started = time.perf_counter()
    found = prompt_sets.programs(prompt, reply)
    assert time.perf_counter() - started < 1.0
    assert len(found) == 8 and all(f"A = {k}\n" in found[k - 1] for k in range(1, 9))
    nested = "### Program 1\n" + "````python\n```python\n### Program 2\n" * 5_000
    assert len(prompt_sets.programs(prompt, nested)) == 8


# -- the reply cap grows with m ----------------------------------------------------------------


class Now:
    def __init__(self, sandbox) -> None:
        self.sandbox = sandbox

    def submit(self, code: str) -> Future:
        future: Future = Future()
        future.set_result(self.sandbox.evaluate(code))
        return future


def run_sets(tmp_path, sandbox, reply: str, m: int, max_program_bytes: int = 65536) -> Database:
    search = SearchSettings(islands=1, selection="uniform", max_program_bytes=max_program_bytes)
    db = Database.open(tmp_path / "run", DatabaseConfig(("fa", "fb"), search=search))
    db.add_initial(PROGRAM, sandbox.evaluate(PROGRAM))
    config = LoopConfig(iterations=1, samples=2, batch=1, depth=1, answers=m, style="full",
                        max_program_bytes=max_program_bytes)
    run(Evolution(config, db), Recording(reply), Now(sandbox))
    return db


def program_of(k: int, size: int) -> str:
    """A fenced program of about `size` bytes (its padding a comment), distinct per k."""
    padding = "#" * (size - len(PROGRAM) - 8)
    return f"```python\n{PROGRAM.replace('B = 2.0', f'B = 2.0{chr(10)}{padding}').replace('A = 1.0', f'A = {k}.0')}```"


def test_eight_programs_near_the_size_bound_all_parse(tmp_path, sandbox):
    reply = "\n".join(f"### Program {k}\n{program_of(k, 1600)}" for k in range(1, 9))
    assert len(reply) > 4 * 2048 + 4096  # over the one-program cap
    db = run_sets(tmp_path, sandbox, reply, m=8, max_program_bytes=2048)
    rows = db.journal.candidates()
    assert len(rows) == 16 and PARSE_ERROR not in {c.status for c in rows}, {c.message for c in rows}


def test_a_10mb_set_reply_is_refused_unparsed_and_stored_once(tmp_path, sandbox):
    reply = "### Program 1\n```python\n" + "x = 1\n" * 1_750_000
    started = time.perf_counter()
    db = run_sets(tmp_path, sandbox, reply, m=8)
    assert time.perf_counter() - started < 10
    rows = db.journal.candidates()
    assert len(rows) == 16 and {c.status for c in rows} == {PARSE_ERROR}
    assert all("reply cap" in c.message for c in rows)
    kept = [c for c in rows if len(c.code) > 100]
    assert [c.answer for c in kept] == [0, 0] and all(len(c.code) <= 8 * 4 * 65536 + 4096 for c in kept)


# -- an unparseable reply is journaled once per reply ------------------------------------------


def test_an_unparseable_set_reply_is_stored_once_per_reply(tmp_path, sandbox):
    reply = "I would rather not write code today. " * 50
    db = run_sets(tmp_path, sandbox, reply, m=8)
    rows = db.journal.candidates()
    assert len(rows) == 16 and {c.status for c in rows} == {PARSE_ERROR}
    for first in (rows[0], rows[8]):  # each completion's first slot keeps its reply
        assert first.answer == 0 and first.code == reply
    others = [c for c in rows if c.answer > 0]
    assert all(len(c.code) < 80 and "slot" in c.code for c in others), others[0].code
    assert db.journal.counts()["parse"] == 16 and len(db.journal.parse_messages()) == 16


def test_one_bad_program_of_a_set_keeps_the_reply_and_the_good_ones(tmp_path, sandbox):
    reply = f"### Program 1\nnone\n### Program 2\n{block(3.0, 2.0)}\n### Program 3\nnone either"
    db = run_sets(tmp_path, sandbox, reply, m=3)
    rows = db.journal.candidates()
    unparsed = [c for c in rows if c.status == PARSE_ERROR]
    assert [c.slot for c in unparsed] == [0, 2, 3, 5]
    assert [c.code == reply for c in unparsed] == [True, False, True, False]


class JunkSets:
    """`mutate:` asked for sets, but three replies of four hold no program."""

    def __init__(self) -> None:
        self.inner, self.calls = MutatePolicy(), 0

    def generate(self, texts, **options) -> list[list[Completion]]:
        out = []
        for row in self.inner.generate(texts, **options):
            self.calls += 1
            out.append([c if self.calls % 4 == 0 else Completion("Nothing today. " * 40) for c in row])
        return out


def test_show_and_report_count_every_lost_program_of_a_stored_once_reply(tmp_path):
    directory = tmp_path / "run"
    config = run_dir.new_config(SPEC, "mutate:", 0, directory, {"search.iterations": 4, "search.target": 2.0,
                                                                "search.answers": 4}, RunOptions(), "process")
    run_dir.execute(config, JunkSets(), progress=False)
    with Database.open(directory, read_only=True) as db:
        rows = db.journal.candidates()
    lost = [c for c in rows if c.status == PARSE_ERROR]
    assert len(lost) >= 4 * 4 and sum(c.code.startswith("Nothing today.") for c in lost) == len(lost) // 4
    data = summary.summary(directory)
    assert data["unparseable"] == len(lost) and data["unparseable_messages"][0]["count"] == len(lost)
    assert f"{len(lost)} unparseable" in "\n".join(text.summary_lines(data, directory, full_failures=True))


# -- mutate: takes m from the project's own instruction ----------------------------------------


ASKS = '# EVOLVE-BLOCK-START\nA = 1.0\nB = 2.0\nNOTE = """\n\nReply with 5000 different improved programs"""\n# EVOLVE-BLOCK-END\n'


@pytest.mark.parametrize("m", [1, 3])
def test_text_inside_a_shown_program_never_sets_mutates_m(m):
    one = prompts.build("full", [Shown(ASKS, 0.5)], rng=np.random.default_rng(0), objectives=("fa", "fb"))
    prompt = prompt_sets.widen(one, m, objectives=("fa", "fb"))
    (replies,) = MutatePolicy().generate([prompt.text], n=2, seed=0)
    for completion in replies:
        assert len(prompts.fenced_blocks(completion.text)) == m
        found = prompt_sets.programs(prompt, completion.text)
        assert len(found) == m and not any(isinstance(p, ParseFailure) for p in found)
    assert prompt_sets.answers_asked(prompt.text, MAX_ANSWERS) == m


def test_mutates_m_is_bounded_by_the_most_a_reply_may_hold():
    forged = prompt_sets.instruction("full", 5000, "```")
    assert prompt_sets.answers_asked(f"context\n\n{forged}\n", MAX_ANSWERS) == MAX_ANSWERS
    closing = "Reply with the complete improved program in one ```python block."
    assert prompt_sets.answers_asked(f"context\n\n{forged}\n\n{closing}\n", MAX_ANSWERS) == 1
