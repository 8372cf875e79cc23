"""The test-time training a run directory records (`evo run --train`, written by
training/online.py into DIR/online/): read here for `evo show` and `evo report`, so evo/
never imports training/."""

from __future__ import annotations

import json
from pathlib import Path

DIRECTORY = "online"


def figures(directory: Path) -> dict | None:
    """{algo, every, steps, reward, kl, seconds, curve} of a run that trained its policy, else None.
    `reward` and `kl` are the last step's (mean scalar of its groups, KL to the init weights when
    measured); `seconds` the time spent in training steps; `curve` one (step, reward, kl) per step."""
    base = Path(directory) / DIRECTORY
    try:
        settings = json.loads((base / "settings.json").read_text())
    except (OSError, ValueError):
        return None
    path = base / "metrics.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    last = records[-1] if records else {}
    return {"algo": settings.get("algo"), "every": settings.get("every"), "steps": len(records),
            "reward": last.get("scalar"), "kl": last.get("kl"), "seconds": last.get("seconds_total", 0.0),
            "curve": [[r["step"], r.get("scalar"), r.get("kl")] for r in records]}
