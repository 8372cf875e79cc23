"""SIGKILL a process that is inserting programs, at random moments; nothing acknowledged is lost."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from evo.database import Database, exact_hash
from evo.scores import scalarize

CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from evo.database import Database, EvaluatedCandidate, DatabaseConfig, SearchSettings
    from evo.scores import Evaluation

    config = DatabaseConfig(objectives=("a", "b"), search=SearchSettings(
        islands=3, migration_interval=2, migration_size=2, reset_interval=7, population_cap=20, selection="uniform"))
    db = Database.open(sys.argv[1], config)
    batch = db.stats()["programs"] // 3 + 1000 * int(sys.argv[2])
    print("ready", flush=True)
    while True:
        batch += 1
        rng = np.random.default_rng(batch)
        candidates = [
            EvaluatedCandidate(f"batch = {batch}\\npart = {part}\\n", Evaluation(scores=rng.random(2)), island=part)
            for part in range(3)
        ]
        for program in db.add_many(candidates):
            print("ack", program.id, batch, flush=True)
        if batch % 2 == 0:
            print("iteration", db.end_iteration()["iteration"], flush=True)
    """
)


def kill_at_random(directory: Path, trial: int, rng: random.Random) -> tuple[list[tuple[int, int]], int]:
    """Start an inserting child, SIGKILL it after a random delay; return its acks and iterations."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory), str(trial)], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert child.stdout.readline().strip() == "ready"
    time.sleep(rng.uniform(0.0, 0.25))
    os.kill(child.pid, signal.SIGKILL)
    output, _ = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    acks, iteration = [], 0
    for line in output.splitlines(keepends=True):
        if not line.endswith("\n"):
            continue  # cut off by the kill: not acknowledged
        kind, *values = line.split()
        if kind == "ack":
            acks.append((int(values[0]), int(values[1])))
        elif kind == "iteration":
            iteration = int(values[0])
    return acks, iteration


def check_store(directory: Path, acks: list[tuple[int, int]], iteration: int) -> None:
    raw = sqlite3.connect(directory / "programs.sqlite")
    assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    raw.close()
    db = Database.open(directory)
    for program_id, batch in acks:
        assert db.get(program_id).code.startswith(f"batch = {batch}\n")
    batches: dict[int, int] = {}
    for program in db.programs.values():
        assert program.hash == exact_hash(program.code)
        assert program.scores.shape == (2,) and program.scalar == scalarize(program.scores, db.weights)
        if program.is_copy:
            assert db.get(program.source).norm_hash == program.norm_hash
        else:
            batch = int(program.code.split()[2])
            batches[batch] = batches.get(batch, 0) + 1
    assert set(batches.values()) == {3}  # a batch is committed whole or not at all
    assert db.iteration >= iteration  # every acknowledged iteration is counted
    migrations = [e for e in db.store.events() if e["kind"] == "migration"]
    assert len(migrations) == db.iteration // 2  # the counter and its migration commit together
    reopened = Database.open(directory)
    assert reopened.state() == db.state()
    db.close()
    reopened.close()


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path):
    rng = random.Random(1234)
    total_acks = 0
    for trial in range(20):
        acks, iteration = kill_at_random(tmp_path, trial, rng)
        total_acks += len(acks)
        check_store(tmp_path, acks, iteration)
    assert total_acks > 20  # the children got real work done between kills
    with Database.open(tmp_path) as db:
        assert db.stats()["programs"] >= total_acks and np.isfinite(db.best().scalar)
