"""Whatever a policy replies: parsing is linear, replies and programs are bounded, text that is
not valid Unicode is a recorded failure, and fences inside programs never break the prompt."""

from __future__ import annotations

import time

import pytest

from evo import prompts
from evo.database import Database, DatabaseConfig, SearchSettings
from evo.database.journal import PARSE_ERROR
from evo.loop import Evolution, LoopConfig, run
from evo.policies.base import Completion
from evo.policies.mutate import MutatePolicy, parse_options
from evo.prompts import Shown, build, fenced_code, parse
from evo.sandbox.pool import Sandbox
from evo.spec import SandboxLimits

import numpy as np

BASE = "# EVOLVE-BLOCK-START\ndef f(x):\n    return x + 1\n# EVOLVE-BLOCK-END\n"
SCORER = '''
def evaluate(path):
    ns = {}
    exec(open(path).read(), ns)
    return {"fa": 1.0 / (1.0 + abs(ns["f"](2) - 9)), "fb": 0.5}
'''

ADVERSARIAL = {  # about 1 MB each: what made the regex parser quadratic, and its neighbours
    "search_lines": "<<<<<<< SEARCH\n" * 70_000,
    "search_then_divider": ("<<<<<<< SEARCH\nx\n=======\n" * 45_000),
    "angle_brackets": "<" * 1_000_000,
    "open_fences": "```python\n" * 100_000,
    "fence_ticks": "`" * 1_000_000,
    "mixed": ("<<<<<<< SEARCH\n```\n=======\n>>>>>>" + "=" * 20 + "\n") * 20_000,
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
@pytest.mark.parametrize("style", ["diff", "full"])
def test_a_1mb_adversarial_reply_parses_in_well_under_a_second(name, style):
    reply = ADVERSARIAL[name]
    assert len(reply) >= 900_000
    prompt = build(style, [Shown(BASE, 0.5)], rng=np.random.default_rng(0))
    started = time.perf_counter()
    try:
        parse(prompt, reply)
    except prompts.ParseFailure:
        pass
    assert time.perf_counter() - started < 0.5


def test_the_line_parser_reads_edits_as_before():
    reply = ("intro\n<<<<<<< SEARCH\n    return x + 1\n=======\n    return x + 2\n>>>>>>> REPLACE\n"
             "<<<<<<< SEARCH\n<<<<<<< SEARCH\ndef f(x):\n=======\ndef f(x, y=0):\n\n>>>>>>> REPLACE\n<<<<<<< SEARCH\nunfinished")
    assert prompts.edits_in(reply) == [("    return x + 1", "    return x + 2"), ("def f(x):", "def f(x, y=0):\n")]
    prompt = build("diff", [Shown(BASE, 0.5)], rng=np.random.default_rng(0))
    assert "return x + 2" in parse(prompt, reply) and "def f(x, y=0):" in parse(prompt, reply)


DOCSTRING = '# EVOLVE-BLOCK-START\ndef f(x):\n    """Usage:\n\n    ```python\n    f(2)\n    ```\n    """\n    return x + 1\n# EVOLVE-BLOCK-END\n'


def test_a_fence_inside_a_program_never_closes_the_prompts_fence():
    prompt = build("full", [Shown(DOCSTRING, 0.5)], [Shown(BASE, 0.1)], rng=np.random.default_rng(0))
    assert "````python\n" + DOCSTRING.rstrip() + "\n````" in prompt.text
    assert fenced_code(prompt.text) == DOCSTRING  # the primary parent, whole
    assert prompts.fenced("a ````` b") .startswith("``````python")
    reply = "Here:\n````python\n" + DOCSTRING.replace("x + 1", "x + 7") + "````\n"
    assert parse(prompt, reply) == DOCSTRING.replace("x + 1", "x + 7")


def test_mutate_proposals_of_a_program_with_a_fence_all_parse():
    prompt = build("full", [Shown(DOCSTRING, 0.5)], rng=np.random.default_rng(0))
    policy = MutatePolicy(parse_options(""))
    replies = policy.generate([prompt.text], n=60, seed=1)[0]
    parsed = []
    for completion in replies:
        parsed.append(parse(prompt, completion.text))  # ParseFailure here is the bug
    assert len(parsed) == 60 and sum('```python' in code for code in parsed) > 30  # (an edit may delete the docstring)


class Scripted:
    """A policy whose every completion is `reply(i)` for the i-th prompt it is asked."""

    def __init__(self, reply) -> None:
        self.reply, self.calls, self.prompts = reply, 0, []

    def generate(self, texts, *, n=1, **options):
        self.prompts.extend(texts)
        out = []
        for _ in texts:
            out.append([Completion(self.reply(self.calls)) for _ in range(n)])
            self.calls += 1
        return out


@pytest.fixture
def sandbox(tmp_path):
    (tmp_path / "score.py").write_text(SCORER)
    with Sandbox(f"{tmp_path / 'score.py'}:evaluate", ["fa", "fb"], SandboxLimits(isolation="none")) as box:
        yield box


def evolve(tmp_path, sandbox, policy, iterations=6, **search) -> tuple[Database, Evolution]:
    config = DatabaseConfig(("fa", "fb"), search=SearchSettings(islands=1, selection="uniform", parents=1,
                                                                inspirations=1, **search))
    db = Database.open(tmp_path / "run", config)
    if not db.programs:
        db.add_initial(BASE, sandbox.evaluate(BASE))
    bound = {"max_program_bytes": search["max_program_bytes"]} if search else {}
    evolution = Evolution(LoopConfig(iterations=iterations, samples=2, batch=2, depth=1, style="full", **bound), db)

    class Pool:
        def submit(self, code):
            from concurrent.futures import Future
            future = Future()
            future.set_result(sandbox.evaluate(code))
            return future

    run(evolution, policy, Pool())
    return db, evolution


def test_programs_over_max_program_bytes_fail_unevaluated_and_prompts_stay_bounded(tmp_path, sandbox):
    huge = "```python\n# EVOLVE-BLOCK-START\ndef f(x):\n    return x + 7\n" + "#" * 3_000_000 + "\n# EVOLVE-BLOCK-END\n```"
    big = "```python\n# EVOLVE-BLOCK-START\ndef f(x):\n    return x + 8\n" + "#" * 5_000 + "\n# EVOLVE-BLOCK-END\n```"
    policy = Scripted(lambda i: [huge, big][i % 2])
    db, evolution = evolve(tmp_path, sandbox, policy, max_program_bytes=4096)
    kinds = [p.failure_kind for p in db.programs.values() if not p.ok]
    assert kinds and set(kinds) == {"too_large"}  # `big`: a program over the bound, refused before the sandbox
    statuses = [c.status for c in db.journal.candidates()]
    assert statuses.count(PARSE_ERROR) == 6  # `huge`: a reply over 4 x 4096 + 4096 bytes, not even parsed
    messages = [c.message for c in db.journal.candidates() if c.status == PARSE_ERROR]
    assert all("reply cap" in m for m in messages)
    assert all(len(c.code) <= 4 * 4096 + 4096 for c in db.journal.candidates())  # the journal keeps a bounded part
    assert max(map(len, policy.prompts)) < 3 * 4096  # parents and inspirations are all within the bound
    assert db.best().code == BASE


def test_a_reply_that_is_not_valid_text_is_a_failure_and_the_run_resumes(tmp_path, sandbox):
    lone = "```python\n# EVOLVE-BLOCK-START\ndef f(x):\n    return x + 3  # \ud800\n# EVOLVE-BLOCK-END\n```"
    raises = "```python\n# EVOLVE-BLOCK-START\ndef f(x):\n    raise ValueError(chr(0xD800) + 'x' * (x > 0))\n# EVOLVE-BLOCK-END\n```"
    nul = "```python\n# EVOLVE-BLOCK-START\ndef f(x):\n    return x + 4  # \x00\n# EVOLVE-BLOCK-END\n```"
    policy = Scripted(lambda i: [lone, raises, nul][i % 3])
    db, evolution = evolve(tmp_path, sandbox, policy)
    assert evolution.committed == 6
    unparseable = [c for c in db.journal.candidates() if c.status == PARSE_ERROR]
    assert unparseable and all("not valid text" in c.message for c in unparseable)
    assert all("return x + 3  # ?" in c.code for c in unparseable)  # kept, the surrogate replaced
    failed = [p for p in db.programs.values() if not p.ok]
    assert failed and all(p.failure_message.encode("utf-8") for p in failed)
    db.close()
    db, evolution = evolve(tmp_path, sandbox, policy, iterations=9)  # the run resumes and goes on
    assert evolution.committed == 9


def test_command_line_text_that_is_not_valid_utf8_is_refused_before_a_run_exists():
    from evo.commands.values import policy_uris
    from evo.commands.values import spec_overrides
    from evo.errors import UserError

    bad = b"\xff".decode("utf-8", "surrogateescape")  # what Python makes of a non-UTF-8 argv byte
    with pytest.raises(UserError, match="not valid UTF-8"):
        spec_overrides({}, (f"prompt.system={bad}",))
    with pytest.raises(UserError, match="not valid UTF-8"):
        policy_uris((f"a{bad}=mutate:",))
