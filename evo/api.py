"""One call for a notebook: evolve a program (or one Python function) with a scoring
function and a policy, no file to write:

    from evo.api import evolve

    def score(path):                                   # the scorer contract: the candidate's path
        f = candidate.load(path).f                     # (evo.sandbox.candidate)
        return {"fit": -abs(f(3) - 10)}

    result = evolve(f, score, "mutate:", iterations=20)
    print(result.best.code, result.real_values(result.best))  # result.top, result.database (open: close it)

`Program.scores` and `.scalar` are oriented (a minimized objective negated, higher is better);
`result.real_values(program)` has the values the scorer reported. A Python policy's `generate`
must return one list per prompt of exactly n Completions (evo.policies.base.check_replies);
anything else, extra completions included, raises BadReplies (a TypeError and ValueError).

A Python function as the scorer runs in this process (isolation "none": no time limit, the
candidate's code runs here too, and `timeout=` is refused rather than ignored); name it
"file.py:function" (a relative path is taken from the working directory) to evaluate in the
sandbox, under `timeout` seconds (default 10).
The run lives in `directory` (a fresh temporary one by default), so `evo show DIR` and
`evo report DIR` read it like any other.
"""

from __future__ import annotations

import inspect
import tempfile
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evo.database import Database
from evo.database.config import DatabaseConfig, SearchSettings
from evo.database.records import Program
from evo.errors import UserError, WorkFailed
from evo.loop import LoopConfig, Progress, RunOptions, run
from evo.program import END, START
from evo.scores import ERROR_KEY, FEEDBACK_KEY, real_values, unwrap


@dataclass
class Evolved:
    """What `evolve` found: the best program, the `top` ones (best first), the open database.

    A Program's `scores` is the ORIENTED vector the search compares (higher is better, so a
    minimized objective is stored negated) and its `scalar` the weighted sum of it;
    `real_values(program)` gives the objectives by name as the scorer reported them."""

    best: Program | None
    top: list[Program]
    database: Database
    directory: Path
    progress: Progress

    def real_values(self, program: Program) -> dict[str, float]:
        """`program`'s objectives by name as the scorer reported them (minimized ones un-negated);
        a failed program has none (ValueError)."""
        config = self.database.config
        return real_values(program.vector, config.objectives, config.minimize)

    def close(self) -> None:
        self.database.close()

    def __enter__(self) -> "Evolved":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def program_text(program: str | Callable) -> str:
    """The initial program: source text as given, or a function's source between the
    EVOLVE-BLOCK markers (the whole function evolves). Text that is not valid UTF-8 (a lone
    surrogate, which no file can hold) is refused in one line."""
    if isinstance(program, str):
        return valid_text(program)
    try:
        source = textwrap.dedent(inspect.getsource(program))
    except (OSError, TypeError):
        raise UserError(f"cannot read the source of {program!r}; pass the program as a string") from None
    return f"# {START}\n{source.rstrip()}\n# {END}\n"


def valid_text(code: str) -> str:
    """`code` when it can be written as UTF-8 (a candidate is a file), else UserError naming the character."""
    try:
        code.encode("utf-8")
    except UnicodeEncodeError as error:
        line = code.count("\n", 0, error.start) + 1
        raise UserError(f"the program is not valid text: a lone surrogate {code[error.start]!r} at line {line} "
                        f"(character {error.start}) cannot be written to a file; remove it, or write it as an "
                        f"escape inside a string literal") from None
    return code


def initial_fails(kind: str, message: str) -> WorkFailed:
    """The documented error of a call whose initial program fails."""
    return WorkFailed(f"the initial program fails: {kind}: {message}")


def discover_objectives(score: Callable, code: str) -> tuple[str, ...]:
    """The numeric keys `score` returns for `code` (in its order), for a call without `objectives`;
    WorkFailed (as `evolve` documents) when the scorer raises or reports an error."""
    from evo.sandbox.child import failure_of

    with tempfile.TemporaryDirectory(prefix="evo-api-") as directory:
        path = Path(directory) / "candidate.py"
        path.write_text(code, encoding="utf-8")
        try:
            raw, _ = unwrap(score(str(path)), ())
        except Exception as error:  # the scorer's or the candidate's: the initial program fails
            raise initial_fails(*failure_of(error)) from None
    if isinstance(raw, Mapping):
        names = tuple(k for k, v in raw.items() if k not in (ERROR_KEY, FEEDBACK_KEY) and isinstance(v, (int, float))
                      and not isinstance(v, bool))
    else:
        names = tuple(f"r{i}" for i in range(len(raw)))  # type: ignore[arg-type]
    if not names:
        raise UserError("the scorer returned no number for the initial program; pass objectives=[...]")
    return names


def evolve(program: str | Callable, score: Callable[[str], Any] | str, policy: Any = "mutate:", *,
           objectives: Sequence[str] | None = None, weights: Sequence[float] | None = None,
           minimize: Sequence[str] = (), iterations: int = 20, seed: int = 0, directory: str | Path | None = None,
           isolation: str | None = None, timeout: float | None = None, style: str = "full",
           system: str = "You improve programs.", top: int = 5, max_new_tokens: int | None = None,
           **search: Any) -> Evolved:
    """Evolve `program` (source text or a function) scored by `score` (a function of the
    candidate's path, or "file.py:function") with `policy` (a URI such as "mutate:" or
    "openai:URL#MODEL;chat", or a Policy object). `max_new_tokens`: the completion budget a
    program (None: what the policy's checkpoint was trained to write, else evo run's default).
    `search`: any [search] key (islands, selection, samples_per_prompt, ...). Raises WorkFailed
    when the initial program fails."""
    from evo import policies, spec
    from evo.sandbox import Sandbox
    from evo.sandbox.loader import ScorerError, absolute
    from evo.search import Initial, Search

    if max_new_tokens is not None and (type(max_new_tokens) is not int or max_new_tokens < 1):
        raise UserError(f"evolve(): max_new_tokens must be an integer >= 1 (or None: the policy's own), not {max_new_tokens!r}")
    code = program_text(program)
    if objectives is None:
        if not callable(score):
            raise UserError("with a scorer named as 'file.py:function', pass objectives=[...]")
        objectives = discover_objectives(score, code)
    try:
        settings = SearchSettings(**{"iterations": iterations, **search})
    except TypeError as error:
        raise UserError(f"evolve(): {error}") from None
    config = DatabaseConfig(tuple(objectives), None if weights is None else tuple(weights), (), settings, seed,
                            "python", tuple(minimize))
    if isinstance(score, str):  # "score.py:evaluate" is the caller's file, wherever the sandbox runs
        try:
            score = absolute(score)
        except ScorerError as error:
            raise UserError(str(error)) from None
    isolation = isolation or ("none" if callable(score) else "process")
    limits = spec.SandboxLimits(isolation=isolation) if timeout is None else spec.SandboxLimits(isolation=isolation, timeout=timeout)
    if isolation == "none" and timeout is not None:
        raise UserError("timeout= bounds an evaluation in the sandbox; a scorer run in this process (a Python function, "
                        "isolation 'none') has no time limit: name it as 'file.py:function' to enforce one")
    out = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="evo-run-"))
    chosen = policies.load(policy) if isinstance(policy, str) else policy
    sandbox = lambda: Sandbox(score, config.objectives, limits, minimize=config.minimize,  # noqa: E731
                              weights=config.weight_vector)
    opened = Search.open(out, config, sandbox, [Initial(code)])
    db = opened.db
    try:
        answers = policies.answers_for(policy, settings.answers) if isinstance(policy, str) else settings.answers or 1
        loop = LoopConfig.of(settings, spec.PromptSettings(style=style, system=system), seed,
                             RunOptions(max_new_tokens=max_new_tokens), answers=answers,
                             policy_tokens=policies.trained_budgets({policy: policy}) if isinstance(policy, str) else ())
        progress = run(opened.evolution(loop, policy if isinstance(policy, str) else type(policy).__name__), chosen,
                       opened.evaluator)
    except BaseException:
        opened.close()
        raise
    opened.evaluator.close()
    ranked = sorted(db.evaluated(), key=lambda p: (-p.value, p.id))
    return Evolved(db.best(), ranked[:top], db, out, progress)
