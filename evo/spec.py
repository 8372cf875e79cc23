"""Problem specs: one TOML file a user writes, loaded into frozen dataclasses.

Every key but `problem.program`, `problem.scorer` and `problem.objectives` has a default;
unknown keys are errors; every error is one line naming the file, the key, what was
expected and what was found. Paths resolve relative to the spec file.
"""

from __future__ import annotations

import copy
import difflib
import math
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from evo.database.config import ANSWERS_BY, POLICY_CHOICES, DatabaseConfig, FeatureConfig, SearchSettings
from evo.database.topology import TOPOLOGIES
from evo.errors import UserError
from evo.prompt_sets import ANSWERS_FIELD
from evo.prompts import STYLES as PROMPT_STYLES
from evo.scores import minimize_problem, weights_problem
from evo.selection import NAMES as SELECTIONS, options_of
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")
ISOLATIONS = ("process", "shared", "none")
PROBLEM_KEYS = ("name", "program", "scorer", "objectives", "weights", "cascade", "minimize")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SpecError(UserError):
    """A problem spec is invalid (exit code 2)."""


@dataclass(frozen=True)
class ProblemSettings:
    name: str
    programs: tuple[Path, ...]  # initial program(s), absolute
    scorer: str  # "/abs/path.py:function" or "package.module:function"
    objectives: tuple[str, ...]
    weights: tuple[float, ...]
    cascade: tuple[tuple[str, float], ...] = ()  # later scorer stages: (scorer, threshold to enter it)
    minimize: tuple[str, ...] = ()  # objectives whose lower values are better (negated in the score vector)

    @property
    def program(self) -> Path:
        return self.programs[0]


@dataclass(frozen=True)
class SandboxLimits:
    isolation: str = "process"  # "process": candidate and scorer in separate processes | "shared": one | "none": in-process
    timeout: float = 10.0  # wall seconds per evaluation
    memory_mb: int = 1024  # address space an evaluation may add to the warm worker's
    workers: int = 2
    cpu_seconds: float = 0.0  # CPU-time cap; 0 = same as timeout
    max_processes: int = 64  # processes/threads an evaluation may own (when not root: on top of the user's)
    output_bytes: int = 65536  # captured stdout+stderr kept per evaluation
    env: tuple[str, ...] = ()  # environment variables passed to the sandbox beyond the minimal set

    # the least value of each count; whether each time may be 0 (the spec reads its rules from here too)
    MINIMUM: ClassVar[dict[str, int]] = {"memory_mb": 16, "workers": 1, "max_processes": 1, "output_bytes": 0}
    TIMES: ClassVar[dict[str, bool]] = {"timeout": False, "cpu_seconds": True}

    def __post_init__(self) -> None:
        if self.isolation not in ISOLATIONS:
            raise UserError(f"sandbox.isolation must be one of {', '.join(map(repr, ISOLATIONS))}, got {self.isolation!r}")
        for name, zero in self.TIMES.items():
            value = getattr(self, name)
            if not _is_num(value) or value < 0 or (value == 0 and not zero):
                raise UserError(f"sandbox.{name} must be a finite number {'>= 0' if zero else '> 0'} (seconds), got {value!r}")
        for name, low in self.MINIMUM.items():
            if not _is_int(getattr(self, name)) or getattr(self, name) < low:
                raise UserError(f"sandbox.{name} must be an integer >= {low}, got {getattr(self, name)!r}")

    @property
    def cpu_limit(self) -> float:
        return self.cpu_seconds or self.timeout


@dataclass(frozen=True)
class PromptSettings:
    style: str = "full"
    system: str = "You improve programs."
    feedback: bool = True  # show evaluator feedback and failed children's errors with shown programs
    set_head: str = ""  # `continue`: a file whose text replaces the program's head in a set prompt ("{answers}" = m)
    separator: str = ""  # `continue`: what separates the programs of a set reply (default: a marker line)
    head: str = ""  # `continue`: a file whose text is the whole prompt for any m ("{answers}" = m), no block prefix
    answer_pattern: str = ""  # with a head: a regular expression; a reply's programs are its matches, wherever they stand


@dataclass(frozen=True)
class Spec:
    path: Path
    problem: ProblemSettings
    sandbox: SandboxLimits
    features: tuple[FeatureConfig, ...]
    search: SearchSettings
    prompt: PromptSettings
    raw: Mapping[str, Any] = field(repr=False, compare=False, default_factory=dict)

    def database_config(self, seed: int = 0) -> DatabaseConfig:
        """The program database's configuration for a run of this spec with `seed`."""
        problem = self.problem
        dedupe = "python" if problem.program.suffix == ".py" else "text"
        return DatabaseConfig(problem.objectives, problem.weights, self.features, self.search, seed, dedupe,
                              problem.minimize)

    def override(self, values: Mapping[str, Any]) -> "Spec":
        """A new spec with dotted keys replaced ("search.iterations", "features.len.bins"),
        validated exactly like the file."""
        raw = copy.deepcopy(dict(self.raw))
        for dotted, value in values.items():
            parts = dotted.split(".")
            if len(parts) not in (2, 3) or (len(parts) == 3) != (parts[0] == "features"):
                raise SpecError(f"{self.path}: override {dotted!r}: expected SECTION.KEY or features.NAME.KEY")
            table = raw
            for part in parts[:-1]:
                table = table.setdefault(part, {})
                if not isinstance(table, dict):
                    raise SpecError(f"{self.path}: override {dotted!r}: {part!r} is not a table")
            table[parts[-1]] = value
        return build(raw, self.path, origin=f"{self.path} (with overrides)")


def load(path: str | Path) -> Spec:
    """Read and validate a spec file; raises SpecError (one line) on any problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{path}: no such spec file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(f"{path}: cannot read the spec: {error}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SpecError(f"{path}: invalid TOML: {error}") from None
    return build(raw, path.resolve(), origin=str(path))


class _Table:
    """Reads typed keys from one TOML table and reports errors as `file: [section] key: ...`."""

    def __init__(self, raw: Mapping[str, Any], origin: str, section: str, known: tuple[str, ...]):
        self.raw, self.origin, self.section = raw, origin, section
        if not isinstance(raw, Mapping):
            self.fail(None, "a table", raw)
        unknown = sorted(set(raw) - set(known))
        if unknown:
            close = difflib.get_close_matches(unknown[0], known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise SpecError(
                f"{origin}: [{section}] unknown key {unknown[0]!r}{hint}; expected one of: {', '.join(known)}"
            )

    def fail(self, key: str | None, expected: str, found: Any) -> None:
        where = f"[{self.section}]" + (f" {key}" if key else "")
        raise SpecError(f"{self.origin}: {where}: expected {expected}, found {_show(found)}")

    def get(self, key: str, default: Any, expected: str, ok: Callable[[Any], bool]) -> Any:
        if key not in self.raw:
            if default is _REQUIRED:
                raise SpecError(f"{self.origin}: [{self.section}] {key}: required key is missing (expected {expected})")
            return default
        value = self.raw[key]
        if not ok(value):
            self.fail(key, expected, value)
        return value

    def integer(self, key: str, default: Any, low: int = 0, high: int | None = None) -> int:
        if high is None:
            return self.get(key, default, f"an integer >= {low}", lambda v: _is_int(v) and v >= low)
        return self.get(key, default, f"an integer in {low}..{high}", lambda v: _is_int(v) and low <= v <= high)

    def number(self, key: str, default: Any, allow_zero: bool = False) -> float:
        what = "a finite number >= 0" if allow_zero else "a finite positive number"
        return float(self.get(key, default, what, lambda v: _is_num(v) and (v > 0 or (allow_zero and v == 0))))

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        return self.get(key, default, f"one of {', '.join(map(repr, choices))}", lambda v: v in choices)

    def string(self, key: str, default: Any) -> str:
        return self.get(key, default, "a non-empty string", lambda v: isinstance(v, str) and v != "")


_REQUIRED = object()


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_num(value: Any) -> bool:
    return _is_int(value) or (isinstance(value, float) and math.isfinite(value))


def _show(value: Any) -> str:
    text = repr(value)
    kind = type(value).__name__
    return f"{kind} {text[:60] + '...' if len(text) > 60 else text}"


def build(raw: Mapping[str, Any], path: Path, origin: str | None = None) -> Spec:
    """Validate a parsed TOML document; `path` anchors relative paths."""
    origin = origin or str(path)
    top = _Table(raw, origin, "top level", ("problem", "sandbox", "features", "search", "prompt"))
    if "problem" not in raw:
        raise SpecError(f"{origin}: [problem] table is missing (it needs program, scorer and objectives)")
    problem = _problem(_Table(raw["problem"], origin, "problem", PROBLEM_KEYS), path)
    features_raw = top.get("features", {}, "a table of [features.NAME] tables", lambda v: isinstance(v, Mapping))
    features = tuple(_feature(name, table, origin, problem) for name, table in features_raw.items())
    search = _search(_Table(raw.get("search", {}), origin, "search", _keys(SearchSettings)))
    for program in problem.programs:
        size = program.stat().st_size
        if size > search.max_program_bytes:
            raise SpecError(f"{origin}: [problem] program: {program.name} is {size} bytes, over [search] "
                            f"max_program_bytes ({search.max_program_bytes}); raise it or shorten the program")
    return Spec(
        path=path,
        problem=problem,
        sandbox=_sandbox(_Table(raw.get("sandbox", {}), origin, "sandbox", _keys(SandboxLimits))),
        features=features,
        search=search,
        prompt=_prompt(_Table(raw.get("prompt", {}), origin, "prompt", _keys(PromptSettings)), path),
        raw=copy.deepcopy(dict(raw)),
    )


def _keys(settings: type) -> tuple[str, ...]:
    """The keys of a section: the fields of the dataclass it becomes."""
    return tuple(f.name for f in fields(settings))


def _problem(t: _Table, path: Path) -> ProblemSettings:
    programs = t.get(
        "program", _REQUIRED, "a path or a non-empty list of paths",
        lambda v: (isinstance(v, str) and v != "") or (isinstance(v, list) and bool(v) and all(isinstance(p, str) for p in v)),
    )
    resolved = tuple((path.parent / p).resolve() for p in ([programs] if isinstance(programs, str) else programs))
    for program in resolved:
        if not program.is_file():
            t.fail("program", "an existing file (relative to the spec)", str(program))
        problem = _marker_problem(program)
        if problem:
            raise SpecError(f"{t.origin}: [problem] program: {program.name}: {problem}")
    objectives = t.get(
        "objectives", _REQUIRED, "a non-empty list of distinct names",
        lambda v: isinstance(v, list) and bool(v) and all(isinstance(o, str) and o for o in v) and len(set(v)) == len(v),
    )
    weights = t.get(
        "weights", [1.0] * len(objectives), f"a list of {weights_problem((), len(objectives))}",
        lambda v: isinstance(v, list) and not weights_problem(v, len(objectives)),
    )
    minimize = t.get(
        "minimize", [], f"a list of objective names (of {objectives})",
        lambda v: isinstance(v, list) and not minimize_problem(v, objectives),
    )
    scorers = _scorers(t, path)
    return ProblemSettings(
        name=t.string("name", path.parent.name or path.stem),
        programs=resolved,
        scorer=scorers[0],
        objectives=tuple(objectives),
        weights=tuple(float(w) for w in weights),
        cascade=tuple(zip(scorers[1:], _thresholds(t, len(scorers)))),
        minimize=tuple(o for o in objectives if o in minimize),
    )


def _marker_problem(program: Path) -> str:
    """Why the EVOLVE-BLOCK-START / EVOLVE-BLOCK-END markers are unusable, or ''."""
    try:
        lines = program.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        return f"cannot read it as UTF-8 text ({error})"
    open_at = None
    for number, line in enumerate(lines, 1):
        if "EVOLVE-BLOCK-START" in line:
            if open_at is not None:
                return f"EVOLVE-BLOCK-START on line {number} inside the block opened on line {open_at}"
            open_at = number
        elif "EVOLVE-BLOCK-END" in line:
            if open_at is None:
                return f"EVOLVE-BLOCK-END on line {number} without a START before it"
            open_at = None
    return f"EVOLVE-BLOCK-START on line {open_at} is never closed" if open_at else ""


def _scorers(t: _Table, path: Path) -> list[str]:
    """The scorer, or the stages of a cascade (a list, cheapest first)."""
    expected = "'path.py:function', 'package.module:function' or a non-empty list of them (a cascade)"
    refs = t.get("scorer", _REQUIRED, expected, lambda v: (isinstance(v, str) and ":" in v) or (
        isinstance(v, list) and bool(v) and all(isinstance(r, str) and ":" in r for r in v)))
    return [_scorer(t, path, ref) for ref in ([refs] if isinstance(refs, str) else refs)]


def _thresholds(t: _Table, stages: int) -> list[float]:
    """One threshold per stage after the first, non-decreasing (a later stage is harder to enter)."""
    expected = f"a list of {stages - 1} non-decreasing numbers (one per scorer stage after the first)"
    values = t.get("cascade", [] if stages == 1 else _REQUIRED, expected, lambda v: isinstance(v, list) and len(v) == stages - 1
                   and all(map(_is_num, v)) and all(a <= b for a, b in zip(v, v[1:])))
    return [float(v) for v in values]


def _scorer(t: _Table, path: Path, ref: str) -> str:
    expected = "'path.py:function' or 'package.module:function'"
    target, _, function = ref.rpartition(":")
    if not _IDENT.match(function) or not target:
        t.fail("scorer", expected, ref)
    if target.endswith(".py") or "/" in target:
        file = (path.parent / target).resolve()
        if not file.is_file():
            t.fail("scorer", "an existing scorer file (relative to the spec)", str(file))
        return f"{file}:{function}"
    if not _MODULE.match(target):
        t.fail("scorer", expected, ref)
    return ref


def _sandbox(t: _Table) -> SandboxLimits:
    d = SandboxLimits()
    return SandboxLimits(
        isolation=t.choice("isolation", d.isolation, ISOLATIONS),
        timeout=t.number("timeout", d.timeout),
        memory_mb=t.integer("memory_mb", d.memory_mb, low=d.MINIMUM["memory_mb"]),
        workers=t.integer("workers", d.workers, low=d.MINIMUM["workers"]),
        cpu_seconds=t.number("cpu_seconds", d.cpu_seconds, allow_zero=d.TIMES["cpu_seconds"]),
        max_processes=t.integer("max_processes", d.max_processes, low=d.MINIMUM["max_processes"]),
        output_bytes=t.integer("output_bytes", d.output_bytes, low=d.MINIMUM["output_bytes"]),
        env=tuple(t.get("env", list(d.env), "a list of environment variable names",
                        lambda v: isinstance(v, list) and all(isinstance(n, str) and _ENV_NAME.match(n) for n in v))),
    )


def _feature(name: str, raw: Any, origin: str, problem: ProblemSettings) -> FeatureConfig:
    t = _Table(raw, origin, f"features.{name}", _keys(FeatureConfig)[1:])
    if name in problem.objectives:
        default_source = f"objective:{name}"
    elif name in ("length", "code_length"):
        default_source = "code_length"
    else:
        default_source = f"scorer:{name}"
    declared = [f"objective:{o}" for o in problem.objectives]
    source = t.get(
        "source", default_source, f"'code_length', 'scorer:<key>' or one of {declared}",
        lambda v: isinstance(v, str)
        and (v == "code_length" or v in declared or (v.startswith("scorer:") and len(v) > len("scorer:"))),
    )
    default_range = [0, 2000] if source == "code_length" else [0.0, 1.0]
    low_high = t.get(
        "range", default_range, "[low, high] with low < high",
        lambda v: isinstance(v, list) and len(v) == 2 and all(map(_is_num, v)) and v[0] < v[1],
    )
    return FeatureConfig(name, source, (float(low_high[0]), float(low_high[1])), t.integer("bins", FeatureConfig.bins, low=1))


def _search(t: _Table) -> SearchSettings:
    d, low = SearchSettings(), SearchSettings.MINIMUM
    islands = t.integer("islands", d.islands, low=low["islands"])
    topology = t.get(
        "topology", d.topology, f"one of {', '.join(map(repr, TOPOLOGIES))} or a list of [a, b] island pairs (< {islands})",
        lambda v: (isinstance(v, str) and v in TOPOLOGIES) or (isinstance(v, list) and all(_is_edge(e, islands) for e in v)),
    )
    target = t.get("target", None, "a finite number", _is_num)
    selection = t.choice("selection", d.selection, SELECTIONS)
    options = t.get("selection_options", {}, "a table of option = value", lambda v: isinstance(v, Mapping))
    unknown = sorted(set(options) - set(options_of(selection)))
    if unknown:
        t.fail("selection_options", f"options of {selection!r} ({', '.join(options_of(selection)) or 'none'})",
               unknown[0])
    counts: dict[str, Any] = {name: t.integer(name, getattr(d, name), low=least, high=d.MAXIMUM.get(name))
                              for name, least in low.items() if name != "islands"}
    return SearchSettings(
        islands=islands, topology=topology if isinstance(topology, str) else tuple((int(a), int(b)) for a, b in topology),
        selection=selection, selection_options=dict(options), target=None if target is None else float(target),
        **counts, **_policy_settings(t),
    )


def _policy_settings(t: _Table) -> dict[str, Any]:
    """[search] policy_weights = { NAME = weight >= 0 } and policy_choice (names are checked at run time)."""
    weights = t.get("policy_weights", {}, "a table of NAME = weight (a number >= 0)",
                    lambda v: isinstance(v, Mapping) and all(_is_num(w) and w >= 0 for w in v.values()))
    choice = t.choice("policy_choice", SearchSettings.policy_choice, POLICY_CHOICES)
    answers_by = t.choice("answers_by", SearchSettings.answers_by, ANSWERS_BY)
    return {"policy_weights": {name: float(w) for name, w in weights.items()}, "policy_choice": choice,
            "answers_by": answers_by}


def _is_edge(edge: Any, islands: int) -> bool:
    return isinstance(edge, list) and len(edge) == 2 and all(_is_int(i) and 0 <= i < islands for i in edge)


def _prompt(t: _Table, path: Path) -> PromptSettings:
    d = PromptSettings()
    set_head = _prompt_file(t, path, "set_head", "a file (relative to the spec) holding {answers}", needs_field=True)
    head = _prompt_file(t, path, "head", "a file (relative to the spec)", needs_field=False)
    style = t.choice("style", d.style, PROMPT_STYLES)
    if head and set_head:
        t.fail("head", "no head beside a set_head (a head is the prompt for every number of programs)", "both given")
    if head and style != "continue":
        t.fail("head", 'a head only with style = "continue" (the other styles build their prompts from the programs)', style)
    separator = t.get("separator", d.separator, "a string", lambda v: isinstance(v, str))
    pattern = t.get("answer_pattern", d.answer_pattern, "a regular expression (Python's re) that an answer matches and an empty text does not",
                    _is_pattern)
    if pattern and not head:
        t.fail("answer_pattern", "an answer_pattern only with a [prompt] head (a continued block has no answer to find)",
               pattern)
    if pattern and separator:
        t.fail("answer_pattern", "no separator beside an answer_pattern (the pattern finds each program)", separator)
    return PromptSettings(style=style, system=t.get("system", d.system, "a string", lambda v: isinstance(v, str)),
                          feedback=t.get("feedback", d.feedback, "true or false", lambda v: isinstance(v, bool)),
                          set_head=set_head, separator=separator, head=head, answer_pattern=pattern)


def _is_pattern(value: Any) -> bool:
    """A string that compiles as a regular expression and cannot match the empty string."""
    if not isinstance(value, str):
        return False
    try:
        return re.compile(value).fullmatch("") is None
    except re.error:
        return False


def _prompt_file(t: _Table, path: Path, key: str, what: str, needs_field: bool) -> str:
    """The absolute path of the prompt text file `key` names ("" when not given), checked readable."""
    name = t.get(key, "", what, lambda v: isinstance(v, str))
    if not name:
        return ""
    file = (path.parent / name).resolve()
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        t.fail(key, "an existing UTF-8 file (relative to the spec)", str(file))
    if needs_field and ANSWERS_FIELD not in text:
        t.fail(key, f"a file whose text holds {ANSWERS_FIELD} (where the number of programs goes)", str(file))
    return str(file)
