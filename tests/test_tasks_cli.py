"""`evo tasks` lists the registered families with their objectives (a real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evo", *args], capture_output=True, text=True, timeout=120)


def test_evo_tasks_lists_both_families_with_objectives():
    done = run("tasks", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout.strip().splitlines()[-1])["tasks"]}
    assert rows["maze"]["objectives"] == ["completion", "gold", "diamond", "avoid_lava"]
    assert rows["symreg"]["objectives"] == [f"region{r}" for r in range(8)]
    assert {"maze-chat"} <= set(rows)
    text = run("tasks")
    assert text.returncode == 0 and "maze" in text.stdout and "region0" in text.stdout


def test_pretrain_with_an_unknown_task_is_one_line_exit_2(tmp_path):
    done = run("pretrain", "--task", "nope", "--out", str(tmp_path / "x"))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "unknown task 'nope'" in done.stderr
