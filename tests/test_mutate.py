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
from evo.policies.mutate import NOTHING_TO_VARY, MutateConfig, MutatePolicy, mutate_program, mutate_source, parse_options
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

    def texts(seed):
        return [c.text for c in policy.generate([prompt_for(PROGRAM)] * 2, n=4, seed=seed)[0]]

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
        if lines < BLOCK.count("\n"):
            kinds.add("delete")
        elif "0.5" not in edited or "4)" not in edited or "** 2" not in edited or "+ 3" not in edited:
            kinds.add("constant")
        else:
            kinds.add("operator")
    assert kinds == {"delete", "constant", "operator"}


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([PROGRAM, INDENTED, BLOCK, "x = 1\n", "pass\n"]))
def test_always_valid_python(seed: int, program: str) -> None:
    edited = mutate_program(program, random.Random(seed), MutateConfig(max_edits=5))
    ast.parse(edited)
    if "EVOLVE-BLOCK-START" in program:
        assert split(edited).head == split(program).head and split(edited).tail == split(program).tail


def repeated_statements(code: str) -> list[str]:
    """The statements that appear twice in one block (body, orelse, finalbody) of `code`."""
    found = []
    for node in ast.walk(ast.parse(code)):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and all(isinstance(s, ast.stmt) for s in body):
                texts = [ast.unparse(s) for s in body]
                found += [t for i, t in enumerate(texts) if t in texts[:i]]
    return found


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([PROGRAM, BLOCK, "x = 1\ny = 2\nx = 2\n", "a += 1\na += 2\n"]))
def test_no_edit_puts_a_statement_twice_in_a_block(seed: int, program: str) -> None:
    edited = mutate_program(program, random.Random(seed), MutateConfig(max_edits=10))
    assert repeated_statements(edited) == []  # "a += 2" moved to "a += 1" is refused too


NAMED = """def f(a):
    b = a + 1
    c = b * 2
    for i in range(3):
        c += i
    return c
"""


def test_no_deletion_leaves_a_name_read_but_never_assigned() -> None:
    """Deleting `b = a + 1` or `c = b * 2` (the only assignments of names read later; `c += i`
    reads c) is a certain NameError: not made. Deleting the loop or the return still happens."""
    deleted = set()
    for seed in range(300):
        edited = mutate_source(NAMED, random.Random(seed), MutateConfig(max_edits=3))
        scope: dict = {}
        exec(edited, scope)
        try:
            scope["f"](1)
        except NameError as error:  # UnboundLocalError included
            raise AssertionError(f"seed {seed}: {error}\n{edited}") from None
        except ArithmeticError:
            pass  # a constant moved to 0 under a division: a failure mutate: cannot foresee
        deleted |= {line for line in ("for i in", "return c") if line not in edited}
    assert deleted == {"for i in", "return c"}


@pytest.mark.slow
def test_an_evo_runs_programs_hold_no_statement_twice(nguyen7_run) -> None:
    from evo.database import Database

    with Database.open(nguyen7_run, read_only=True) as db:
        programs = db.evaluated()
    assert len(programs) > 20
    assert [p.id for p in programs if repeated_statements(p.code)] == []  # its best held `def f` twice


NOTHING = "# EVOLVE-BLOCK-START\ndef f(x):\n    return np.log1p(x)\n# EVOLVE-BLOCK-END\n"


def test_a_block_with_nothing_to_vary_is_said_once(capsys) -> None:
    policy = MutatePolicy()
    policy.generate([prompt_for("import numpy as np\n\n" + NOTHING)] * 3, n=4, seed=0)
    policy.generate([prompt_for(NOTHING)], n=4, seed=1)
    assert capsys.readouterr().err == NOTHING_TO_VARY + "\n"
    MutatePolicy().generate([prompt_for(PROGRAM), prompt_for(NOTHING.replace("log1p(x)", "log1p(x + 1)"))], n=4, seed=0)
    assert capsys.readouterr().err == ""  # a number or an operator to change: nothing to say


@pytest.mark.slow
def test_evo_run_says_when_mutate_has_nothing_to_vary(tmp_path) -> None:
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    nguyen7 = Path(__file__).resolve().parents[1] / "examples" / "nguyen7"
    shutil.copy(nguyen7 / "score.py", tmp_path / "score.py")
    (tmp_path / "initial.py").write_text("import numpy as np\n\n\n" + NOTHING)
    (tmp_path / "problem.toml").write_text('[problem]\nprogram = "initial.py"\nscorer = "score.py:evaluate"\n'
                                           'objectives = ["r0", "r1", "r2"]\n[search]\niterations = 4\n')
    done = subprocess.run([sys.executable, "-m", "evo", "run", str(tmp_path / "problem.toml"), "--policy", "mutate:",
                           "--out", str(tmp_path / "run"), "--quiet"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(NOTHING_TO_VARY) == 1 and "duplicates" in done.stdout


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


def test_mutate_is_shown_the_program_of_a_continue_spec_and_edits_a_python_block_in_any_file() -> None:
    from evo.policies import prompt_style

    assert prompt_style("mutate:", "continue") == "full" and prompt_style("mutate:max_edits=2", "continue") == "full"
    assert prompt_style("local:some/dir", "continue") == "continue" and prompt_style("mutate:", "diff") == "diff"
    program = "x0 -> y\n0.5 -> 1.2\nexprs 1\n# EVOLVE-BLOCK-START\n1.5 + 0.0 * x0\n# EVOLVE-BLOCK-END\n"
    children = {mutate_program(program, random.Random(seed)) for seed in range(20)}
    assert len(children) > 5
    for child in children:
        head, _, rest = child.partition("# EVOLVE-BLOCK-START\n")
        assert head == "x0 -> y\n0.5 -> 1.2\nexprs 1\n" and rest.endswith("# EVOLVE-BLOCK-END\n")
        ast.parse(rest.split("# EVOLVE-BLOCK-END")[0])
