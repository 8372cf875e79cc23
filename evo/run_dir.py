"""A run directory: what `evo run` writes and what `evo run --resume` and `evo show` read.

    DIR/run.json          the run's settings (spec path, overrides, policy or named policies, seed, loop options)
    DIR/programs.sqlite   the program database and the loop's journal (one SQLite file)
    DIR/best.<ext>        the best program so far (rewritten at the end of a run)

A run directory may also hold a separate journal, DIR/journal.sqlite; resuming it moves that
journal into programs.sqlite.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from evo import spec as specs
from evo.database import Database
from evo.errors import UserError
from evo.loop import LoopConfig, Observer, Progress, RunOptions, run
from evo.policy_mix import PolicyMix
from evo.private import private_dir, write_private
from evo.search import Search

RUN_FILE, LOCK_FILE = "run.json", "run.lock"
LEGACY_JOURNAL_FILE = "journal.sqlite"  # a separate journal, moved into DATABASE_FILE on resume
RUN_OPTIONS = tuple(f.name for f in fields(RunOptions))  # the loop settings a run stores, in run.json's "loop"


@dataclass(frozen=True)
class RunConfig:
    directory: Path
    spec_path: Path
    policy: str
    seed: int = 0
    executor: str = "process"
    overrides: dict = field(default_factory=dict)
    loop: RunOptions = RunOptions()
    policies: dict = field(default_factory=dict)  # name -> URI for a run of named policies (`policy` is then "")
    history: list = field(default_factory=list)  # {"time", "policy", "from", "to"}: addresses replaced on resume

    @property
    def named(self) -> dict[str, str]:
        """Every policy of the run by name; a bare URI is named by itself."""
        return dict(self.policies) or {self.policy: self.policy}

    def mix(self, spec: specs.Spec) -> PolicyMix:
        return PolicyMix.of(self.named, spec.search.policy_weights, spec.search.policy_choice)

    def save(self) -> None:
        """Write run.json (atomically: a kill never leaves half a file)."""
        data = {**asdict(self), "directory": None, "spec_path": str(self.spec_path)}
        path = self.directory / RUN_FILE
        try:
            partial = path.with_name(RUN_FILE + ".tmp")
            write_private(partial, json.dumps(data, indent=2) + "\n")
            partial.replace(path)
        except OSError as error:
            raise UserError(f"{self.directory}: cannot write the run directory ({error.strerror}); pick another --out") from None

    @classmethod
    def read(cls, directory: Path) -> "RunConfig":
        path = directory / RUN_FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise UserError(f"{directory}: not a run directory (no {RUN_FILE}); start one with evo run SPEC --out DIR") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise UserError(f"{path}: unreadable: {error}") from None
        if isinstance(data, dict):
            data.setdefault("policies", {})  # a run.json written before runs named their policies
            data.setdefault("history", [])  # ... or before a resume could move a policy
        problem = _run_file_problem(data)
        if problem:
            raise UserError(f"{path}: not a valid run file ({problem}); restore it or start a new run with evo run SPEC")
        return cls(**{**data, "directory": directory, "spec_path": Path(data["spec_path"]), "loop": RunOptions(**data["loop"])})

    def spec(self) -> specs.Spec:
        spec = specs.load(self.spec_path)
        return spec.override(self.overrides) if self.overrides else spec


_RUN_FILE_TYPES = {"spec_path": str, "policy": str, "seed": int, "executor": str, "overrides": dict, "loop": dict,
                   "policies": dict, "history": list}


def _run_file_problem(data: object) -> str:
    """What is wrong with a parsed run.json, or ''."""
    if not isinstance(data, dict):
        return "expected a JSON object"
    for key, kind in _RUN_FILE_TYPES.items():
        if not isinstance(data.get(key), kind) or isinstance(data.get(key), bool):
            return f"{key!r} should be a {kind.__name__}, found {data.get(key)!r}"[:200]
    unknown = sorted(set(data) - {*_RUN_FILE_TYPES, "directory"}) + sorted(set(data["loop"]) - set(RUN_OPTIONS))
    if unknown:
        return f"unknown key {unknown[0]!r}"
    if data["executor"] not in ("process", "ray"):
        return f"executor should be 'process' or 'ray', found {data['executor']!r}"
    if not all(isinstance(uri, str) for uri in data["policies"].values()) or not (data["policy"] or data["policies"]):
        return "expected a policy URI or named policies"
    return ""


def policy_names(directory: Path) -> tuple[str, ...]:
    """The names of the run's policies from its run.json; () when there is no readable one."""
    try:
        return tuple(RunConfig.read(Path(directory)).named)
    except UserError:
        return ()


def check_spec(spec_path: Path, overrides: dict) -> specs.Spec:
    spec = specs.load(spec_path)
    return spec.override(overrides) if overrides else spec


def new_config(spec_path: Path, policy: str | Mapping[str, str], seed: int, out: Path | None, overrides: dict,
               loop: RunOptions, executor: str) -> RunConfig:
    """`policy`: one URI, or name -> URI for a run of several policies."""
    spec = check_spec(spec_path, overrides)
    named = dict(policy) if isinstance(policy, Mapping) else {}
    uri = "" if isinstance(policy, Mapping) else policy
    if named:
        PolicyMix.of(named, spec.search.policy_weights, spec.search.policy_choice)  # before DIR exists
    directory = Path(out) if out is not None else Path("runs") / spec.problem.name
    if (directory / RUN_FILE).exists():
        raise UserError(f"{directory} already holds a run; continue it with evo run --resume {directory} or pick another --out")
    try:
        private_dir(directory)
    except OSError as error:
        raise UserError(f"{directory}: cannot create the run directory ({error.strerror}); pick another --out") from None
    config = RunConfig(directory, spec.path, uri, seed, executor, dict(overrides), loop, named)
    config.save()
    return config


def resume_config(directory: Path, overrides: dict, loop: Mapping[str, Any], executor: str | None,
                  moved: Mapping[str, str] | None = None) -> RunConfig:
    """The stored settings, with new overrides on top (e.g. a larger --iterations), the RunOptions
    fields in `loop` (name -> value: the flags given) replacing the stored ones, and `moved`
    policies at new addresses (name -> URI); nothing is written here: `execute` saves them once
    the run directory has accepted them."""
    config = RunConfig.read(Path(directory))
    config = replace(config, overrides={**config.overrides, **overrides}, loop=replace(config.loop, **loop),
                     executor=executor or config.executor)
    if moved:
        config = move_policies(config, moved)
    config.mix(config.spec())  # validate
    return config


def move_policies(config: RunConfig, moved: Mapping[str, str]) -> RunConfig:
    """The run with some of its policies at new addresses (same names, so the search goes on
    as one run), each change recorded in `history`. A run of one bare URI takes a bare URI."""
    named = config.named
    if len(named) == 1 and len(moved) == 1 and next(iter(moved.items()))[0] == next(iter(moved.values())):
        moved = {next(iter(named)): next(iter(moved.values()))}  # its one policy, whatever the new URI
    unknown = sorted(set(moved) - set(named))
    if unknown:
        raise UserError(f"--policy {unknown[0]}=...: the run has no policy of that name (it has {', '.join(named)}); "
                        "--resume --policy NAME=URI moves one of them to a new address")
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    changes = [{"time": when, "policy": name, "from": named[name], "to": uri}
               for name, uri in moved.items() if named[name] != uri]
    return replace(config, policy="", policies={**named, **moved}, history=[*config.history, *changes])


def loop_config(spec: specs.Spec, config: RunConfig) -> LoopConfig:
    """The loop's settings: the spec's, the run's stored options, and each policy's programs per
    reply ([search] answers, else what its checkpoint was trained for), prompt style and tokens
    per program (what its checkpoint was trained to write, unless the run sets --max-new-tokens)."""
    from evo.policies import answers_for, prompt_style, trained_budgets

    answers = tuple((name, answers_for(uri, spec.search.answers)) for name, uri in config.named.items())
    styles = tuple((name, prompt_style(uri, spec.prompt.style)) for name, uri in config.named.items())
    return LoopConfig.for_spec(spec, config.seed, config.loop, policy_answers=answers, policy_styles=styles,
                               policy_tokens=trained_budgets(config.named))


def write_best(spec: specs.Spec, db: Database, directory: Path) -> Path | None:
    best = db.best()
    if best is None:
        return None
    path = Path(directory) / f"best{spec.problem.program.suffix}"
    write_private(path, best.code)
    return path


@contextmanager
def _exclusive(directory: Path):
    """One `evo run` per run directory at a time (an advisory lock the kernel drops on exit)."""
    import fcntl

    try:
        lock = open(directory / LOCK_FILE, "a+")
    except OSError as error:
        raise UserError(f"{directory}: cannot use the run directory ({error.strerror}); pick another --out") from None
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"{directory} is in use by another evo run; wait for it or stop it first") from None
        yield


def execute(config: RunConfig, policy, progress: bool = True, observers: Sequence[Observer] = (),
            resumable: bool = True) -> str:
    """Run (or continue) the loop to the budget or the target; return a one-line summary.
    `policy`: a Policy, or name -> Policy for every name of `config.named`; `observers`: told
    what the loop does (the online learner of `evo run --train`); `resumable`: a failure before
    the first iteration says how to continue with `evo run --resume` (not for a run that another
    command owns, such as one of `evo compare`'s).
    The settings are saved to run.json only after the lock and the database accepted them."""
    with _exclusive(config.directory):
        return _execute(config, policy, progress, observers, resumable)


def _execute(config: RunConfig, policy, progress: bool, observers: Sequence[Observer], resumable: bool) -> str:
    spec = config.spec()
    with Search.of_spec(spec, config.directory, seed=config.seed, executor=config.executor,
                        adopt=config.directory / LEGACY_JOURNAL_FILE) as search:
        config.save()
        bar = _ProgressBar(spec.search.iterations, search.db.iteration, enabled=progress)
        try:
            evolution = search.evolution(loop_config(spec, config), config.mix(spec), observers)
            result = run(evolution, policy, search.evaluator, bar.update)
        except UserError as error:
            if search.db.iteration > 0 or not resumable:
                raise
            raise type(error)(f"{error}{first_call_hint(config)}") from None
        finally:
            bar.close()
        write_best(spec, search.db, config.directory)
        return _summary(result, search.db, config.directory)


def first_call_hint(config: RunConfig) -> str:
    """How to go on when the run failed before its first iteration (a wrong URI, a dead server)."""
    name = next(iter(config.policies), None)
    uri = f"{name}=URI" if name else "URI"
    return (f"; the run in {config.directory} has no iteration yet: fix the policy and continue it with "
            f"evo run --resume {config.directory} --policy {uri}, or delete it and start again")


def _summary(result: Progress, db, directory: Path) -> str:
    """The run's line: its counts as `evo show` and `evo report` give them (evaluated: the programs
    stored, copies aside; pending: proposed in an iteration the run stopped before committing),
    after a warning when most proposals were unparseable."""
    from evo import failures

    stats, counts = db.stats(), db.journal.counts()
    best = "none" if result.best is None else f"{result.best:.6g}"
    reached = " (target reached)" if result.reached_target else ""
    pending = f", {counts['pending']} pending" if counts["pending"] else ""
    line = (f"{directory}: {result.iteration} iterations, best {best}{reached}, "
            f"{stats['programs']} evaluated, {stats['failures']} failed, "
            f"{counts['parse']} unparseable, {counts['duplicate']} duplicates{pending}")
    proposed = sum(counts[k] for k in ("ok", "failed", "parse", "duplicate"))
    warning = failures.mostly_unparseable(counts["parse"], proposed, failures.common_unparsed(db.journal.parse_messages(), 1),
                                          directory)
    return line if warning is None else f"{warning}\n{line}"


def postfix(progress: Progress) -> str:
    """The progress bar's figures (coverage only when the spec has MAP-Elites features)."""
    best = "-" if progress.best is None else f"{progress.best:.4g}"
    coverage = "" if progress.coverage is None else f" cov={progress.coverage:.0%}"
    return f"best={best}{coverage} evals/s={progress.evals_per_s:.1f} fail={progress.failures}"


class _ProgressBar:
    def __init__(self, total: int, initial: int, enabled: bool) -> None:
        from tqdm import tqdm

        self._bar = tqdm(total=total, initial=initial, unit="it", disable=not enabled, dynamic_ncols=True)
        self._last = time.monotonic()

    def update(self, progress: Progress) -> None:
        self._bar.n = progress.iteration
        now = time.monotonic()
        if now - self._last > 0.2 or progress.iteration >= (self._bar.total or 0):
            self._bar.set_postfix_str(postfix(progress), refresh=True)
            self._last = now

    def close(self) -> None:
        self._bar.close()


__all__ = ["RunConfig", "check_spec", "execute", "loop_config", "new_config", "resume_config"]
