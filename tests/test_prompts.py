"""Prompt styles and their strict parsers."""

from __future__ import annotations

import numpy as np
import pytest

from evo.program import split
from evo.prompts import ParseFailure, Prompt, Shown, apply_edits, build, cut_at_stop, fenced_code, parse

BASE = "import math\n# EVOLVE-BLOCK-START\ndef f(x):\n    return x + 1\n# EVOLVE-BLOCK-END\nprint(f(2))\n"
OTHER = BASE.replace("x + 1", "x * 3")
WORSE = BASE.replace("x + 1", "x - 5")


def shown(code, scalar):
    return Shown(code=code, scalar=scalar, scores={"a": scalar, "b": 1 - scalar})


def rng(seed=0):
    return np.random.default_rng(seed)


def last_fenced(text):
    return fenced_code(text)


@pytest.mark.parametrize("style", ["full", "diff"])
def test_context_prompt_shows_scores_and_parent_last(style):
    prompt = build(style, [shown(BASE, 0.5), shown(OTHER, 0.4)], [shown(WORSE, 0.1)], rng=rng(), objectives=["a", "b"])
    assert "score 0.5 (a=0.5, b=0.5)" in prompt.text and "score 0.1" in prompt.text
    assert "Objectives (higher is better): a, b" in prompt.text
    assert last_fenced(prompt.text).strip() == BASE.strip()
    assert prompt.base.code == BASE
    assert ("SEARCH" in prompt.text) == (style == "diff")


@pytest.mark.parametrize("style", ["full", "diff", "versions"])
def test_minimized_objectives_are_shown_as_measured_and_labelled(style):
    lag = Shown(code=BASE, scalar=0.2, scores={"overall": 0.39, "lag_error": 0.87})  # real values, as the loop gives
    prompt = build(style, [lag], [shown(OTHER, 0.1)], rng=rng(), objectives=["overall", "lag_error"],
                   minimize=["lag_error"])
    assert "lag_error=0.87 [lower is better]" in prompt.text and "-0.87" not in prompt.text
    assert "overall=0.39," in prompt.text and "overall=0.39 [lower" not in prompt.text
    assert "Objectives: overall (higher is better), lag_error (lower is better)." in prompt.text
    assert "higher is better): overall" not in prompt.text


def test_versions_ordered_by_score_best_last():
    prompt = build("versions", [shown(OTHER, 0.4)], [shown(BASE, 0.9), shown(WORSE, 0.1)], rng=rng())
    text = prompt.text
    assert text.index("x - 5") < text.index("x * 3") < text.index("x + 1")
    assert "## Version 2 (score 0.9" in text and "Write version 3" in text
    assert prompt.base.code == BASE and last_fenced(text).strip() == BASE.strip()


def test_full_reply_with_markers_only_changes_the_block():
    prompt = build("full", [shown(BASE, 0.5)], rng=rng())
    reply = "Sure:\n```python\nimport os  # changed outside\n# EVOLVE-BLOCK-START\ndef f(x):\n    return x * 7\n# EVOLVE-BLOCK-END\nprint('no')\n```\n"
    assert parse(prompt, reply) == BASE.replace("x + 1", "x * 7")


def test_full_reply_without_markers_is_the_new_block():
    prompt = build("full", [shown(BASE, 0.5)], rng=rng())
    reply = "```python\ndef f(x):\n    return 0\n```"
    assert parse(prompt, reply) == BASE.replace("x + 1", "0")


def test_full_reply_takes_last_python_block():
    prompt = build("full", [shown(BASE, 0.5)], rng=rng())
    reply = "```python\ndef f(x):\n    return 1\n```\nbetter:\n```python\ndef f(x):\n    return 2\n```\n```text\nnote\n```"
    assert "return 2" in parse(prompt, reply)


@pytest.mark.parametrize("reply", ["no code here", "```python\n\n```", "```python\n# EVOLVE-BLOCK-START\nx=1\n```"])
def test_full_parse_failures(reply):
    prompt = build("full", [shown(BASE, 0.5)], rng=rng())
    with pytest.raises(ParseFailure):
        parse(prompt, reply)


def test_diff_applies_edits_strictly_inside_the_block():
    prompt = build("diff", [shown(BASE, 0.5)], rng=rng())
    reply = "<<<<<<< SEARCH\n    return x + 1\n=======\n    return x + 2\n>>>>>>> REPLACE\n"
    assert parse(prompt, reply) == BASE.replace("x + 1", "x + 2")
    two = reply + "<<<<<<< SEARCH\ndef f(x):\n=======\ndef f(x, y=0):\n>>>>>>> REPLACE"
    assert parse(prompt, two) == BASE.replace("x + 1", "x + 2").replace("def f(x):", "def f(x, y=0):")


@pytest.mark.parametrize(
    "search",
    ["    return x + 9", "print(f(2))", "import math"],  # absent; outside the block (twice)
)
def test_diff_search_must_match_inside_block(search):
    prompt = build("diff", [shown(BASE, 0.5)], rng=rng())
    with pytest.raises(ParseFailure):
        parse(prompt, f"<<<<<<< SEARCH\n{search}\n=======\nx\n>>>>>>> REPLACE")


def test_diff_ambiguous_search_fails():
    with pytest.raises(ParseFailure, match="2 times"):
        apply_edits("a\nb\na\n", [("a", "c")])


def test_diff_accepts_a_full_fenced_program():
    prompt = build("diff", [shown(BASE, 0.5)], rng=rng())
    assert parse(prompt, "```python\ndef f(x):\n    return -x\n```") == BASE.replace("x + 1", "-x")
    with pytest.raises(ParseFailure):
        parse(prompt, "I would change the constant.")


def test_continue_prompt_is_head_plus_block_prefix():
    prompts = [build("continue", [shown(BASE, 0.5)], rng=rng(seed)) for seed in range(30)]
    block = split(BASE).block
    for prompt in prompts:
        assert prompt.text == "import math\n" + prompt.prefix
        assert block.startswith(prompt.prefix)
        assert "EVOLVE-BLOCK" not in prompt.text
        assert "EVOLVE-BLOCK-END" in prompt.stop
    assert len({p.prefix for p in prompts}) > 5  # the prefix really is random


def test_continue_candidate_is_prefix_plus_completion_cut_at_stop():
    prompt = build("continue", [shown(BASE, 0.5)], rng=rng(3), stop=["\nprint"])
    rest = split(BASE).block[len(prompt.prefix):]
    assert parse(prompt, rest) == BASE
    # the model ran past the block: everything from the end marker on is dropped
    assert parse(prompt, rest + "# EVOLVE-BLOCK-END\nprint(f(2))\njunk") == BASE
    assert parse(prompt, rest.rstrip("\n") + "\nprint(99)") == BASE


def test_continue_accepts_fenced_program_and_rejects_empty():
    prompt = build("continue", [shown(BASE, 0.5)], rng=rng(1))
    assert "return 5" in parse(prompt, "```python\ndef f(x):\n    return 5\n```")
    empty = Prompt(text="import math\n", style="continue", base=prompt.base, prefix="", stop=("EVOLVE-BLOCK-END",))
    with pytest.raises(ParseFailure):
        parse(empty, "   \n# EVOLVE-BLOCK-END")


def test_cut_at_stop_earliest():
    assert cut_at_stop("abcXdefY", ["Y", "X"]) == "abc"
    assert cut_at_stop("abc", ["Z"]) == "abc"
    assert cut_at_stop("x = 1\n# EVOLVE-BLOCK-END", ["EVOLVE-BLOCK-END"]) == "x = 1\n"


def test_unknown_style():
    with pytest.raises(ValueError, match="unknown prompt style"):
        build("poem", [shown(BASE, 0.5)], rng=rng())
