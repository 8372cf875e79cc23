"""What a policy's training writes as JSON, typed and validated on read: RUN/online/ of a run
that trained its policy (`evo run --train`, written by training/online.py) and the metrics
lines of every training run. `evo show` and `evo report` read them here, so evo/ never imports
training/; the trainers read them here too, so a file has one set of rules.

    RUN/online/settings.json          Settings: estimator, step period, training settings, estimator options
    RUN/online/groups/NNNNNNNN.json   one prompt's token ids and completions (training/online_files.py)
    RUN/online/state.pt               weights, optimizer, step (training/online_files.py)
    RUN/online/metrics.jsonl          one record per step (read_metrics)
    RUN/online/stopped.json           why training stopped during the run, when it did (read_stopped)

A damaged file is a one-line UserError naming it and what to do; a partial last metrics line
(a kill while appending) is left out, as the step that wrote it runs again.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TypeGuard

from evo.errors import UserError

DIRECTORY = "online"
SETTINGS_FILE, METRICS_FILE, STOPPED_FILE = "settings.json", "metrics.jsonl", "stopped.json"


def move_online(run: Path) -> str:
    """What to do about a damaged file of RUN/online/."""
    return f"move {Path(run) / DIRECTORY} away to continue the search without training, or start a new run"


def damaged(path: Path, reason: str, fix: str) -> UserError:
    """The one line for a file of a training run that cannot be used as it is."""
    return UserError(f"{path}: {reason[:200]}; {fix}")


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` (a kill leaves the old file or the new one); a failed write
    (disk full, read-only file system) is a one-line UserError and leaves the old file."""
    partial = path.with_name(path.name + ".tmp")
    try:
        partial.write_text(text)
        os.replace(partial, path)
    except OSError as error:
        try:
            partial.unlink()
        except OSError:
            pass
        raise UserError(f"cannot write {path} ({error.strerror or error}); free space or make the directory "
                        "writable, then continue with --resume (what was saved before is kept)") from None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Settings:
    """RUN/online/settings.json: what `--train`, `--train-every` and `--train-option` asked for.
    The types are checked here; training/online.py's OnlineSettings checks the values against
    the estimators and the trainer's settings."""

    algo: str
    every: int = 4  # committed iterations per PPO step
    train: dict = field(default_factory=dict)  # trainer settings (training.online.TRAIN_FIELDS)
    options: dict = field(default_factory=dict)  # estimator options (K, alpha, ...)
    # what the groups/ and outcomes/ files are laid out for, recorded by the run's first session
    # (0 and "": a run that did not record them): completions per prompt, programs per completion,
    # and the checkpoint the weights in state.pt started from
    group: int = 0
    answers: int = 0
    checkpoint: str = ""

    @staticmethod
    def path(run: Path) -> Path:
        """RUN/online/settings.json."""
        return Path(run) / DIRECTORY / SETTINGS_FILE

    def save(self, run: Path) -> None:
        directory = Path(run) / DIRECTORY
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UserError(f"cannot create {directory} ({error.strerror}); pick a writable --out") from None
        write_atomic(self.path(run), json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def read(cls, run: Path) -> "Settings | None":
        """The run's settings; None when it did not train its policy."""
        path = cls.path(run)
        if not path.exists():
            return None
        try:
            raw = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise damaged(path, f"unreadable ({error})", move_online(run)) from None
        problem = _settings_problem(raw)
        if problem:
            raise damaged(path, f"not the run's training settings ({problem})", move_online(run))
        return cls(**raw)


def _settings_problem(raw: object) -> str:
    names = {f.name for f in fields(Settings)}
    if not isinstance(raw, dict):
        return "expected a JSON object"
    unknown = sorted(set(raw) - names)
    if unknown or "algo" not in raw:
        return f"unknown key {unknown[0]!r}" if unknown else "no 'algo'"
    if not isinstance(raw["algo"], str) or not raw["algo"].isidentifier():
        return f"'algo' should be an estimator name, found {raw['algo']!r}"
    if not _is_int(raw.get("every", 1)) or raw.get("every", 1) < 1:
        return f"'every' should be an integer >= 1, found {raw['every']!r}"
    for key in ("train", "options"):
        if not isinstance(raw.get(key, {}), dict) or not all(isinstance(k, str) for k in raw.get(key, {})):
            return f"{key!r} should be a table of settings, found {raw[key]!r}"
    for key in ("group", "answers"):
        if not _is_int(raw.get(key, 0)) or not 0 <= raw.get(key, 0) <= 1 << 20:
            return f"{key!r} should be an integer in 0..{1 << 20}, found {raw[key]!r}"
    if not isinstance(raw.get("checkpoint", ""), str):
        return f"'checkpoint' should be a path, found {raw['checkpoint']!r}"
    return ""


def _record_problem(record: object) -> str:
    """What makes a parsed metrics line not a step's record ('' when nothing): a dict with an
    integer step >= 1 whose values are numbers, null or lists of numbers."""
    if not isinstance(record, dict) or not _is_int(record.get("step")) or record["step"] < 1:
        return "not a step's record"
    for key, value in record.items():
        if not (value is None or _is_number(value) or (isinstance(value, list) and all(map(_is_number, value)))):
            return f"{key!r} is not a number"
    return ""


def read_metrics(path: Path) -> list[dict]:
    """The records of a metrics.jsonl (none when it does not exist; an archived run's
    metrics.jsonl.gz when only that exists); a partial last line (a kill while appending) is
    left out, any other bad line is a one-line UserError."""
    path = Path(path)
    if not path.exists() and path.with_name(path.name + ".gz").exists():
        path = path.with_name(path.name + ".gz")
    if not path.exists():
        return []
    try:
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        lines = data.decode().splitlines()
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise damaged(path, f"unreadable ({error})", "move it away to go on without the old metrics") from None
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        problem = _record_problem(record)
        if problem:
            if number == len(lines) and not data.endswith(b"\n"):
                break  # cut short by a kill: logged again when its step reruns
            raise damaged(path, f"line {number} is {problem}", "move the file away to go on without the old metrics")
        records.append(record)
    return records


def truncate_metrics(path: Path, steps: int) -> None:
    """Keep the records of the first `steps` steps (a run killed after logging, before saving)."""
    if not Path(path).exists():
        return
    kept = [r for r in read_metrics(path) if r["step"] <= steps]
    write_atomic(Path(path), "".join(json.dumps(r) + "\n" for r in kept))


def write_stopped(run: Path, step: int, message: str) -> None:
    """Record that the run's training stopped after `step` steps, and the one line why."""
    write_atomic(Path(run) / DIRECTORY / STOPPED_FILE, json.dumps({"step": step, "message": message}) + "\n")


def read_stopped(run: Path) -> str:
    """The one line why the run's training stopped ('' while it trains, or when the run did not train)."""
    path = Path(run) / DIRECTORY / STOPPED_FILE
    if not path.exists():
        return ""
    try:
        raw = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise damaged(path, f"unreadable ({error})", "delete it: a resumed run writes it again when it stops") from None
    if not isinstance(raw, dict) or not _is_int(raw.get("step")) or not isinstance(raw.get("message"), str):
        raise damaged(path, "not a record of why training stopped", "delete it: a resumed run writes it again when it stops")
    return raw["message"][:500]


def _number_or_none(value: object) -> float | None:
    return float(value) if _is_number(value) and math.isfinite(value) else None


def _best_in_set(record: dict) -> float | None:
    """A step's best_in_set (a record written before the key existed held it as "scalar")."""
    return _number_or_none(record.get("best_in_set", record.get("scalar")))


def figures(directory: Path) -> dict | None:
    """{algo, every, steps, reward, kl, seconds, curve, stopped} of a run that trained its policy, else None.
    `reward` and `kl` are the last step's (its `best_in_set`: the mean over completions of the best
    program's scalar; KL to the init weights when measured); `seconds` the time spent in training
    steps; `curve` one (step, reward, kl) per step; `stopped` the one line why training stopped
    during the run ('' when it did not)."""
    settings = Settings.read(directory)
    if settings is None:
        return None
    records = read_metrics(Path(directory) / DIRECTORY / METRICS_FILE)
    last = records[-1] if records else {}
    return {"algo": settings.algo, "every": settings.every, "steps": len(records),
            "reward": _best_in_set(last), "kl": _number_or_none(last.get("kl")),
            "seconds": _number_or_none(last.get("seconds_total")) or 0.0,
            "curve": [[r["step"], _best_in_set(r), _number_or_none(r.get("kl"))] for r in records],
            "stopped": read_stopped(directory)}
