"""EVOLVE-block handling: split/splice round trips, any comment syntax, malformed markers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evo.database.hashing import normalize, normalized_hash
from evo.program import MarkerError, splice, split

PY = "import math\n\n# EVOLVE-BLOCK-START\ndef f(x):\n    return x\n# EVOLVE-BLOCK-END\n\nprint(f(1))\n"


def test_split_python_markers():
    program = split(PY)
    assert program.head == "import math\n\n"
    assert program.start_line == "# EVOLVE-BLOCK-START\n"
    assert program.block == "def f(x):\n    return x\n"
    assert program.end_line == "# EVOLVE-BLOCK-END\n"
    assert program.tail == "\nprint(f(1))\n"
    assert program.text == PY


@pytest.mark.parametrize("comment", ["//", "--", ";", "/*", "<!--", "%"])
def test_markers_in_any_comment_syntax(comment):
    text = f"int a;\n{comment} EVOLVE-BLOCK-START\nint b = 1;\n  {comment} EVOLVE-BLOCK-END  \nint c;"
    program = split(text)
    assert program.block == "int b = 1;\n"
    assert program.tail == "int c;"
    assert splice(text, "int b = 2;") == text.replace("int b = 1;", "int b = 2;")


def test_no_markers_is_all_block():
    program = split("x = 1\n")
    assert not program.has_markers and program.block == "x = 1\n"
    assert splice("x = 1\n", "y = 2\n") == "y = 2\n"


@pytest.mark.parametrize(
    "text",
    [
        "# EVOLVE-BLOCK-START\nx\n",
        "x\n# EVOLVE-BLOCK-END\n",
        "# EVOLVE-BLOCK-END\nx\n# EVOLVE-BLOCK-START\n",
        "# EVOLVE-BLOCK-START\n# EVOLVE-BLOCK-START\nx\n# EVOLVE-BLOCK-END\n",
    ],
)
def test_malformed_markers_raise(text):
    with pytest.raises(MarkerError):
        split(text)


def test_splice_adds_newline_before_end_marker():
    out = splice(PY, "def f(x):\n    return 2 * x")
    assert "return 2 * x\n# EVOLVE-BLOCK-END\n" in out
    assert split(out).head == "import math\n\n" and split(out).tail == "\nprint(f(1))\n"


_lines = st.lists(st.text(alphabet="abc =()\t#:", max_size=12), max_size=6).map(lambda ls: "".join(line + "\n" for line in ls))


@given(head=_lines, block=_lines, tail=_lines, new=_lines)
def test_split_splice_round_trip(head, block, tail, new):
    text = f"{head}# EVOLVE-BLOCK-START\n{block}# EVOLVE-BLOCK-END\n{tail}"
    program = split(text)
    assert (program.head, program.block, program.tail) == (head, block, tail)
    assert program.text == text
    spliced = split(splice(text, new))
    assert (spliced.head, spliced.block, spliced.tail) == (head, new, tail)


def test_normalize_and_hash_ignore_only_insignificant_whitespace():
    """The one duplicate key (evo.database.hashing), which the loop and the database share."""
    a = "def f(x):\n    return x\n"
    b = "def f(x):   \r\n\n\n    return x\n\n"
    assert normalize(a) == normalize(b)
    assert normalized_hash(a) == normalized_hash(b)
    assert normalized_hash(a) != normalized_hash("def f(x):\n  return x\n")  # indentation is syntax
    assert normalized_hash(a) != normalized_hash("def f(x):\n    return x + 1\n")
