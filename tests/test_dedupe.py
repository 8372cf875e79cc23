"""Normalized duplicates: programs equal up to formatting, comments and docstrings (Python,
by AST) or up to whitespace (text) are dropped before evaluation and counted as duplicates."""

from __future__ import annotations

import pytest

from evo.database import Database, DatabaseConfig, SearchSettings
from evo.database.hashing import dedupe_hash, normalized_hash, python_form
from evo.database.journal import DUPLICATE
from evo.loop import Evolution, LoopConfig, run
from evo.policies.base import Completion
from evo.sandbox import Sandbox
from evo.spec import SandboxLimits

ORIGINAL = '''def f(x, y):
    """Add them."""
    return x + y * 2
'''
SAME = [
    "def f(x, y):\n    return x + y * 2\n",  # no docstring
    "def f( x,y ):  # adds\n    # the sum\n    return (x + (y * 2))\n",  # comments, spaces, parentheses
    "def f(x, y):\n    '''Another docstring.'''\n\n\n    return x+y*2\n",
    'def f(x, y):\n    """Add them."""\n    return x + \\\n        y * 2\n',  # a continued line
]
DIFFERENT = [
    "def f(x, y):\n    return x + y * 3\n",
    "def f(x, y):\n    return (x + y) * 2\n",
    "def f(x, z):\n    return x + z * 2\n",
    "def f(x, y):\n    s = 'Add them.'\n    return x + y * 2\n",  # a string that is not a docstring
    "def f(x, y):\n    if x:\n        pass\n    return x + y * 2\n",
]


def test_python_key_ignores_comments_formatting_and_docstrings():
    key = dedupe_hash(ORIGINAL, "python")
    assert all(dedupe_hash(code, "python") == key for code in SAME)
    assert len({dedupe_hash(code, "python") for code in DIFFERENT} | {key}) == len(DIFFERENT) + 1
    nested = "try:\n    pass\nexcept E:\n    if x:\n        class A:\n            {}x = 1\n"
    assert dedupe_hash(nested.format("'''doc'''\n            ")) == dedupe_hash(nested.format(""))
    assert dedupe_hash(nested.format("'''doc'''\n            ")) != dedupe_hash(nested.format("y = 2\n            "))


def test_python_key_keeps_meaningful_indentation_and_falls_back_when_unparsable():
    loop_body = "for i in a:\n    g()\n    h()\n"
    after_loop = "for i in a:\n    g()\nh()\n"
    assert dedupe_hash(loop_body) != dedupe_hash(after_loop)
    broken = "def f(:\n    return 1\n"
    assert python_form(broken) is None
    assert dedupe_hash(broken) == normalized_hash(broken) == dedupe_hash(broken + "\n\n   \n")


def test_text_key_is_whitespace_only():
    assert dedupe_hash("a  b\n\n c\t", "text") == dedupe_hash(" a b c", "text")
    assert dedupe_hash("a b # c", "text") != dedupe_hash("a b", "text")  # no comment syntax in text
    with pytest.raises(ValueError, match="unknown duplicate key"):
        dedupe_hash("x", "xml")


def test_spec_picks_the_key_by_the_program_suffix(tmp_path):
    from evo import spec as specs

    (tmp_path / "score.py").write_text("def evaluate(path):\n    return [1.0]\n")
    for name in ("initial.py", "initial.txt"):
        (tmp_path / name).write_text("x = 1\n")
        (tmp_path / f"{name}.toml").write_text(
            f'[problem]\nprogram = "{name}"\nscorer = "score.py:evaluate"\nobjectives = ["a"]\n')
    assert specs.load(tmp_path / "initial.py.toml").database_config().dedupe == "python"
    assert specs.load(tmp_path / "initial.txt.toml").database_config().dedupe == "text"


PROGRAM = "# EVOLVE-BLOCK-START\nA = 1.0\n# EVOLVE-BLOCK-END\n"
SCORER = "def evaluate(path):\n    ns = {}\n    exec(open(path).read(), ns)\n    return [1.0 / (1.0 + abs(ns['A'] - 3.0))]\n"


class Replies:
    def __init__(self, replies):
        self.replies = replies

    def generate(self, texts, *, n=1, **options):
        return [[Completion(self.replies[i % len(self.replies)]) for i in range(n)] for _ in texts]


class Counting:
    def __init__(self, sandbox):
        self.sandbox, self.codes = sandbox, []

    def submit(self, code):
        self.codes.append(code)
        return self.sandbox.submit(code)


def test_loop_drops_normalized_duplicates_before_evaluation(tmp_path):
    block = "```python\n# EVOLVE-BLOCK-START\n{}\n# EVOLVE-BLOCK-END\n```"
    variants = ["A = 3.0", "A = 3.0  # the answer", "A = (3.0)", "# try this\nA = 3.0", "A=3.0"]
    (tmp_path / "score.py").write_text(SCORER)
    config = DatabaseConfig(objectives=("a",), search=SearchSettings(islands=1, selection="uniform"))
    with Sandbox(f"{tmp_path / 'score.py'}:evaluate", ["a"], SandboxLimits(workers=1)) as sandbox, \
            Database.open(tmp_path / "run", config) as db:
        db.add_initial(PROGRAM, sandbox.evaluate(PROGRAM))
        evaluator = Counting(sandbox)
        loop = LoopConfig(iterations=2, samples=len(variants), batch=1, depth=1)
        progress = run(Evolution(loop, db), Replies([block.format(v) for v in variants]), evaluator)
        statuses = [c.status for c in db.journal.candidates()]
    assert len(evaluator.codes) == 1  # one distinct program; everything else dropped before evaluation
    assert statuses.count(DUPLICATE) == progress.duplicates == 2 * len(variants) - 1
