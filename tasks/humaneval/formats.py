"""Prompts and the strict parser for the humaneval task.

The prompt shows the problem's code (imports, helpers, signature, docstring) in a fenced
block and asks for `m` complete implementations, each in its own ```python block:

    Complete the Python function `add`.

    ```python
    def add(x: int, y: int):
        \"\"\"Add two numbers x and y ...\"\"\"
    ```

    Reply with 1 complete implementation of `add` (the whole `def`, with any imports and
    helpers it needs) in one ```python block.

An answer is the code of one block. The parser is strict: every fenced block must be
labelled python, py, python3 or nothing, must parse as Python and must define
`def <entry_point>` at its top level (ParseError otherwise); the number of blocks must be
`m` (TemplateMismatch otherwise). Text outside the blocks is ignored. The scored program is
the problem's prompt followed by the answer, so the prompt's helpers stay defined and the
answer's `def` replaces the stub.
"""

from __future__ import annotations

import ast
import re

from tasks.base import ParseError, TemplateMismatch
from tasks.humaneval.data import HumanEvalProblem

FENCE = re.compile(r"```([^\n`]*)\n(.*?)```", re.DOTALL)
LANGUAGES = ("python", "py", "python3", "")

_TEMPLATE = """Complete the Python function `{name}`.

```python
{code}```

Reply with {m} {what} of `{name}` (the whole `def`, with any imports and helpers it needs) {where}."""


def prompt(problem: HumanEvalProblem, m: int) -> str:
    what = "complete implementation" if m == 1 else "different complete implementations"
    where = "in one ```python block" if m == 1 else "each in its own ```python block"
    return _TEMPLATE.format(name=problem.entry_point, code=problem.prompt, m=m, what=what, where=where)


def fenced(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def parse(problem: HumanEvalProblem, completion: str, m: int) -> list[str]:
    """The code of each block; ParseError if malformed, TemplateMismatch if not m blocks."""
    blocks = FENCE.findall(completion)
    if not blocks:
        raise ParseError("no ```python fenced block")
    if len(blocks) != m:
        raise TemplateMismatch(f"expected {m} block(s), found {len(blocks)}")
    answers = []
    for language, body in blocks:
        if language.strip().lower() not in LANGUAGES:
            raise ParseError(f"a fenced block is labelled {language.strip()[:20]!r}, expected python")
        try:
            tree = ast.parse(body)
        except SyntaxError as error:
            raise ParseError(f"a block does not parse as Python: {error.msg} (line {error.lineno})") from None
        if not any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == problem.entry_point
                   for s in tree.body):
            raise ParseError(f"a block does not define `def {problem.entry_point}` at its top level")
        answers.append(body)
    return answers


def program(problem: HumanEvalProblem, answer: str) -> str:
    """The program an answer is scored as: the problem's prompt, then the answer."""
    return problem.prompt + "\n\n" + answer
