"""A comparison directory's settings: OUT/settings.json, written before the first run, holds
what the comparison was asked (keyed by flag), so `evo compare --task ... --resume` keeps its
finished runs only under the settings that made them.

    recorded = task_settings(...)
    check(out, recorded, resume)   # before any work: one line when OUT is not this comparison
    ...                            # load the policies
    record(out, recorded)          # then OUT/settings.json, 0600

A resume with other settings, a resume of a directory that holds no comparison (an `evo run`
directory, a stray folder), and a fresh comparison into a directory that holds one are
refused in one line; nothing in OUT is touched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from evo.errors import UserError
from evo.private import private_dir, write_private

SETTINGS_FILE = "settings.json"
MADE = (SETTINGS_FILE, "compare.json", "search")  # what a comparison writes into OUT
RUN_FILE = "run.json"  # evo run's (evo/run_dir.py)
RESUMABLE = ("--task",)  # the modes --resume continues
FIXED = ("points", "scan")  # SearchProtocol fields no flag sets


def task_settings(task: str, contenders: Sequence, ks: Sequence[int], instances: int, sampling, search) -> dict:
    """`evo compare --task`'s settings, keyed by flag (`contenders`: pools.Contender, with the
    answers per reply each is asked for; `sampling`: pools.Sampling; `search`: SearchProtocol)."""
    return {"mode": "--task", "--task": task,
            "--policy": [f"{c.name}={c.uri}" for c in contenders],
            "--answers": [f"{c.name}={c.answers}" for c in contenders],
            "--instances": instances, "--pool": sampling.pool, "--k": list(ks), "--temperature": sampling.temperature,
            "--tokens-per-answer": sampling.tokens_per_answer, "--seed": sampling.seed,
            # the search's runs spend it too (before, the loop's own budget: a resume across that change is refused)
            "search tokens per program": sampling.tokens_per_answer,
            **{(f"search {key}" if key in FIXED else "--search-" + key.replace("_", "-")): value
               for key, value in asdict(search).items()}}


def spec_settings(spec_path: Path, uris: Mapping[str, str], answers: Mapping[str, int], overrides: dict, seeds: int,
                  programs: int, seed: int, trained: Mapping[str, dict], tokens: int | None = None) -> dict:
    """`evo compare --spec`'s settings, keyed by flag (`trained`: NAME -> its training settings;
    `tokens`: the budget per program, None: evo run's default)."""
    return {"mode": "--spec", "--spec": str(spec_path), "--set": overrides,
            "--policy": [f"{name}={uri}" for name, uri in uris.items()],
            "--answers": [f"{name}={m}" for name, m in answers.items()],
            "--seeds": seeds, "--programs": programs, "--seed": seed, "--train": dict(trained),
            "--tokens-per-answer": tokens}


def check(out: Path, settings: dict, resume: bool) -> None:
    """Refuse, in one line, an OUT that is not this comparison: an `evo run` directory; with
    `resume`, a directory without OUT/settings.json or one recorded with other settings;
    without it, a directory that holds a comparison already."""
    if (out / RUN_FILE).exists():
        raise UserError(f"{out} holds an evo run ({RUN_FILE}), not a comparison; pick another --out")
    recorded = read(out)
    if not resume:
        if recorded is not None or any((out / name).exists() for name in MADE):
            again = "continue a stopped one with --resume (same arguments), or " if settings["mode"] in RESUMABLE else ""
            raise UserError(f"{out} already holds a comparison; {again}pick another --out or remove it")
        return
    if recorded is None:
        raise UserError(f"{out} holds no comparison to resume (no {SETTINGS_FILE}); start one without --resume, "
                        "with an --out of its own")
    if recorded.get("mode") != settings["mode"]:
        raise UserError(f"{out} holds an evo compare {recorded.get('mode')} comparison, which --resume does not continue; "
                        "pick another --out")
    now = json.loads(json.dumps(settings))
    differ = [key for key in {**recorded, **now} if recorded.get(key) != now.get(key)]
    if differ:
        changes = "; ".join(f"{key} {_shown(recorded.get(key))} (now {_shown(now.get(key))})" for key in differ)
        raise UserError(f"{out} was started with other settings: {changes}; resume it with the same arguments, "
                        "or pick another --out")


def record(out: Path, settings: dict) -> None:
    """Write OUT/settings.json (OUT made private when this call creates it)."""
    private_dir(out)
    write_private(out / SETTINGS_FILE, json.dumps(settings, indent=1) + "\n")


def read(out: Path) -> dict | None:
    """OUT/settings.json, or None when there is none."""
    path = out / SETTINGS_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        data = error
    if not isinstance(data, dict) or not isinstance(data.get("mode"), str):
        raise UserError(f"{path}: not a comparison's settings; restore it, or pick another --out")
    return data


def _shown(value) -> str:
    if value is None:
        return "unset"
    if isinstance(value, list):
        return " ".join(map(str, value)) or "none"
    return json.dumps(value) if isinstance(value, dict) else str(value)
