"""Four runs pinned by digest: the search and training behave as they did before the seam
between them was redesigned (issue 43). Each digest covers what the run produced: the journal's
candidates and the programs, exactly (and, for a run that trains, what training changed in the weights,
within a tolerance: `update_fingerprint`).

(a) `mutate:` on nguyen7; (b) the shipped set-trained maze checkpoint asked for 3 routes a reply;
(c) `evo run --train vpo` on that checkpoint (online training of set replies); (d) `evo train --spec`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow


def journal_digest(directory: Path) -> str:
    connection = sqlite3.connect(directory / "programs.sqlite")
    rows = connection.execute("SELECT iteration, slot, hash, status FROM candidates ORDER BY iteration, slot").fetchall()
    codes = connection.execute("SELECT code FROM programs ORDER BY id").fetchall()
    connection.close()
    return hashlib.sha256(json.dumps([rows, codes]).encode()).hexdigest()


def update_fingerprint(weights: dict[str, torch.Tensor], checkpoint: str) -> list[float]:
    """What training changed, in five numbers: the norm of the update (trained - the checkpoint
    it started from) and its projections on four fixed random directions. The bits of trained
    weights differ between machines and library versions (the order of float sums in a matmul),
    the journal's do not: the weights are compared within a tolerance, the journal exactly."""
    from safetensors.torch import load_file

    from evo.policies import resolve_checkpoint

    start = load_file(Path(resolve_checkpoint(checkpoint)) / "model.safetensors")
    update = torch.cat([(weights[n].double() - start[n].double()).flatten() for n in sorted(weights) if n in start])
    directions = torch.randn(4, update.numel(), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return [float(update.norm()), *(directions @ update).tolist()]


def assert_close_update(found: list[float], pinned: list[float]) -> None:
    assert found[0] > 0, "training changed nothing"
    assert found == pytest.approx(pinned, rel=1e-3, abs=1e-3 * pinned[0])


def evo(*args: str) -> None:
    from evo.cli import main

    try:
        main(list(args))
    except SystemExit as stop:
        assert stop.code in (0, None)


def maze_spec(directory: Path) -> Path:
    import tasks

    task = tasks.get("maze-clusters")
    return task.problem_spec(task.instances("test", 1, seed=11)[0], directory)


def test_a_mutate_run(tmp_path):
    evo("run", "examples/nguyen7/problem.toml", "--policy", "mutate:", "--iterations", "6", "--seed", "3",
        "--out", str(tmp_path / "run"), "--set", "sandbox.workers=1", "--quiet")
    assert journal_digest(tmp_path / "run") == PINNED["mutate"]


def test_a_set_reply_run(tmp_path):
    evo("run", str(maze_spec(tmp_path / "maze")), "--policy", "local:maze-clusters-vpo", "--answers", "3",
        "--iterations", "4", "--seed", "2", "--threads", "1", "--out", str(tmp_path / "run"), "--quiet")
    assert journal_digest(tmp_path / "run") == PINNED["sets"]


def test_a_run_that_trains_its_policy(tmp_path):
    evo("run", str(maze_spec(tmp_path / "maze")), "--policy", "local:maze-clusters-vpo", "--answers", "3",
        "--train", "vpo", "--train-every", "2", "--batch", "1", "--depth", "1", "--iterations", "6", "--seed", "4",
        "--threads", "1", "--out", str(tmp_path / "run"), "--quiet")
    state = torch.load(tmp_path / "run" / "online" / "state.pt", weights_only=True)
    assert state["step"] == 2
    assert journal_digest(tmp_path / "run") == PINNED["online"][0]
    assert_close_update(update_fingerprint(state["model"], "maze-clusters-vpo"), PINNED["online"][1])


def test_a_spec_training_run(tmp_path):
    from safetensors.torch import load_file

    from training import checkpoint

    evo("train", "--spec", str(maze_spec(tmp_path / "maze")), "--init", "maze-clusters-warmup", "--algo", "grpo",
        "--out", str(tmp_path / "train"), "--steps", "2", "--prompts", "2", "--group", "4", "--seed", "6",
        "--threads", "1", "--no-progress")
    assert [r["step"] for r in checkpoint.read_metrics(tmp_path / "train")] == [1, 2]
    weights = load_file(tmp_path / "train" / "model.safetensors")
    assert journal_digest(tmp_path / "train") == PINNED["spec"][0]
    assert_close_update(update_fingerprint(weights, "maze-clusters-warmup"), PINNED["spec"][1])


PINNED: dict = {  # taken at 82a9afc, before the redesign (the update fingerprints: 82a9afc rerun on a second machine)
    "mutate": "6f028b4559e290f28a2356128ebb9acd2df1857e282a12543710e43fa752c757",
    "sets": "dc4de4e2b965793fe633b6d62355799e378ad4fda4078eed9927d0fe95dd033f",
    "online": ["c0a99df896692333657ad893050792927b033f05a766a3cd03d0af6b564b5e29",
               [0.026711056722844306, 0.002696663155826201, 0.0014870449566260699, -0.05842412025433611, 0.005010899178242098]],
    "spec": ["3e48a0cdd034fd6fb7d7bd5f2db0135ce644466436d45977b55d8d3889091427",
             [0.2582885127333509, 0.09762588843341591, -0.2896932392793349, -0.34972564475840245, 0.0627620988455139]],
}
