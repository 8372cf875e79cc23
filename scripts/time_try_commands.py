"""Wall time of the try commands (docs/results.md, "Wall times of the try commands") on this machine (the figures in
their comments). Cheap commands run as written; `evo pretrain` and `evo train` run a
few steps and are extrapolated to their step counts (seconds per step x steps, plus
the start-up measured in the same run); `evo pretrain`'s held-out evaluation (30 mazes x 30
samples, run at its end) is taken from the shipped maze-warmup's pretrain.json, measured when
it was trained. Prints one JSON object as its last line.

    PYTHONPATH=. python scripts/time_try_commands.py [--out /tmp/try]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(*args: str) -> float:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "evo", *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"evo {' '.join(args)} failed: {done.stderr.strip()[-300:]}")
    return time.monotonic() - start


def per_step(command: list[str], out: Path, short: int, long: int) -> tuple[float, float]:
    """(seconds at `short` steps, seconds at `long`) -> the cost of one step and the fixed part."""
    a = timed(*command, "--steps", str(short), "--out", f"{out}-{short}")
    b = timed(*command, "--steps", str(long), "--out", f"{out}-{long}")
    step = max(0.0, (b - a) / (long - short))
    return step, max(0.0, a - short * step)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("/tmp/evo-try"))
    out = parser.parse_args().out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    figures = {"load_average_before": os.getloadavg()[0], "cpus": os.cpu_count()}
    figures["tasks_s"] = timed("tasks")
    figures["check_s"] = timed("check", "examples/function_minimization/problem.toml")
    figures["run_nguyen7_100_s"] = timed("run", "examples/nguyen7/problem.toml", "--policy", "mutate:",
                                         "--iterations", "100", "--out", str(out / "nguyen7"), "--quiet")
    figures["report_s"] = timed("report", str(out / "nguyen7"))
    step, fixed = per_step(["pretrain", "--task", "maze", "--size", "nano", "--eval-instances", "0"], out / "warmup", 5, 25)
    recorded = json.loads((ROOT / "evo" / "checkpoints" / "maze-warmup" / "pretrain.json").read_text())
    figures["pretrain_700_steps_s_extrapolated"] = fixed + 700 * step
    figures["pretrain_evaluation_s_recorded"] = recorded["eval_seconds"]
    step, fixed = per_step(["train", "--task", "maze", "--algo", "vpo", "--init", "evo/checkpoints/maze-warmup"],
                           out / "vpo", 1, 3)
    figures["train_150_steps_s_extrapolated"] = fixed + 150 * step
    figures["load_average_after"] = os.getloadavg()[0]
    print(json.dumps({"name": "try_commands", **{k: round(v, 1) for k, v in figures.items()}}))


if __name__ == "__main__":
    main()
