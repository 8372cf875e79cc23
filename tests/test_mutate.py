"""The `mutate:` baseline: edits stay inside the EVOLVE block, always parse, are seeded, and
come back in a form the loop's parser accepts."""

from __future__ import annotations

import ast
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evo.errors import UserError
from evo.policies import load
from evo.policies.mutate import MutateConfig, MutatePolicy, mutate_program, mutate_source, parse_options
from evo.program import split
from evo.prompts import Shown, build, fenced_code, parse

HEAD = "import math\n\n\ndef helper(x):\n    return x * 2\n\n\n"
BLOCK = '''def priority(item, n):
    score = 0.5 * item + 3
    if item > n and n != 0:
        score -= math.sqrt(n) / 2
    for i in range(4):
        score += i ** 2
    return score
'''
TAIL = "\n\nprint(priority(1, 2))\n"
PROGRAM = HEAD + "# EVOLVE-BLOCK-START\n" + BLOCK + "# EVOLVE-BLOCK-END" + TAIL
INDENTED = "class Heuristic:\n    # EVOLVE-BLOCK-START\n    def f(self, x):\n        return x + 1 < 3\n    # EVOLVE-BLOCK-END\n"


def prompt_for(program: str) -> str:
    return f"An older attempt:\n```python\nx = 1\n```\nImprove this one:\n```python\n{program}```\n"


def test_completions_are_whole_fenced_programs_edited_inside_the_block() -> None:
    out = MutatePolicy().generate([prompt_for(PROGRAM)], n=20, seed=0)[0]
    assert len(out) == 20
    changed = 0
    for c in out:
        assert c.text.startswith("```python\n") and c.text.endswith("```") and c.text.count("```") == 2
        code = fenced_code(c.text)
        ast.parse(code)
        parts = split(code)
        assert parts.head == HEAD and parts.tail == split(PROGRAM).tail  # nothing outside the block moved
        changed += parts.block != BLOCK
    assert changed >= 18


def test_seeded() -> None:
    policy = MutatePolicy()
    texts = lambda seed: [c.text for c in policy.generate([prompt_for(PROGRAM)] * 2, n=4, seed=seed)[0]]
    assert texts(3) == texts(3) and texts(3) != texts(4)


def test_every_kind_of_edit_happens() -> None:
    rng = random.Random(0)
    base = ast.dump(ast.parse(BLOCK))
    kinds = set()
    for _ in range(200):
        edited = mutate_source(BLOCK, rng, MutateConfig(max_edits=1))
        lines, tree = edited.count("\n"), ast.dump(ast.parse(edited))
        if tree == base:
            continue
        if lines > BLOCK.count("\n"):
            kinds.add("duplicate")
        elif lines < BLOCK.count("\n"):
            kinds.add("delete")
        elif "0.5" not in edited or "4)" not in edited or "** 2" not in edited or "+ 3" not in edited:
            kinds.add("constant")
        else:
            kinds.add("operator")
    assert kinds == {"duplicate", "delete", "constant", "operator"}


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([PROGRAM, INDENTED, BLOCK, "x = 1\n", "pass\n"]))
def test_always_valid_python(seed: int, program: str) -> None:
    edited = mutate_program(program, random.Random(seed), MutateConfig(max_edits=5))
    ast.parse(edited)
    if "EVOLVE-BLOCK-START" in program:
        assert split(edited).head == split(program).head and split(edited).tail == split(program).tail


def test_indented_block_keeps_its_indentation() -> None:
    for seed in range(10):
        edited = mutate_program(INDENTED, random.Random(seed))
        assert split(edited).block.startswith("    def f(self, x):\n")


def test_no_parent_gives_empty_completion_and_unparseable_source_is_kept() -> None:
    assert MutatePolicy().generate(["no code here"], n=2, seed=0)[0][0].text == ""
    assert mutate_source("def (:\n", random.Random(0)) == "def (:\n"


@pytest.mark.parametrize("style", ["full", "diff", "versions"])
def test_the_loop_parser_accepts_the_replies(style: str) -> None:
    shown = Shown(PROGRAM, 1.0, {"a": 1.0})
    prompt = build(style, [shown], [Shown("x = 2\n", 0.5)], rng=np.random.default_rng(0))
    for c in MutatePolicy().generate([prompt.text], n=5, seed=1)[0]:
        candidate = parse(prompt, c.text)
        ast.parse(candidate)
        assert split(candidate).head == HEAD


def test_load_and_options() -> None:
    assert load("mutate:").config == MutateConfig()
    assert parse_options("max_edits=1,scale=0.1") == MutateConfig(max_edits=1, scale=0.1)
    with pytest.raises(UserError, match="unknown option 'x'"):
        load("mutate:x=1")
    with pytest.raises(UserError, match=r"option max_edits: expected an integer in \[1, 100\], got 'many'"):
        parse_options("max_edits=many")


@pytest.mark.parametrize("option, message", [
    ("max_edits=0", r"mutate: option max_edits: expected an integer in \[1, 100\], got 0"),
    ("max_edits=-5", r"mutate: option max_edits: expected an integer in \[1, 100\], got -5"),
    ("max_edits=1.5", r"mutate: option max_edits: expected an integer in \[1, 100\], got '1.5'"),
    ("scale=nan", r"mutate: option scale: expected a finite number in \[0, 10\], got nan"),
    ("scale=-1", r"mutate: option scale: expected a finite number in \[0, 10\], got -1.0"),
    ("max_edits", "mutate: unknown option 'max_edits'"),
])
def test_options_are_range_checked(option: str, message: str) -> None:
    with pytest.raises(UserError, match=f"^{message}"):
        load(f"mutate:{option}")
    with pytest.raises(UserError, match="mutate: option scale"):
        MutateConfig(scale=float("inf"))


def test_sampling_arguments_are_range_checked() -> None:
    with pytest.raises(UserError, match="^mutate: temperature: expected a finite number >= 0, got nan$"):
        load("mutate:").generate(["```python\nx = 1\n```"], temperature=float("nan"))
