"""`--executor ray`: Ray actors evaluate exactly like the process pool, same run for a seed."""

from __future__ import annotations

from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'vpo-evo[ray]')")

from evo import spec as specs  # noqa: E402
from evo.database import Database  # noqa: E402
from evo.loop import Evolution, LoopConfig, run  # noqa: E402
from evo.policies.mutate import MutatePolicy  # noqa: E402
from evo.ray_executor import RayEvaluator  # noqa: E402
from evo.sandbox.pool import Sandbox  # noqa: E402
from tests.test_loop import DATABASE, PROGRAM, SCORER, snapshot  # noqa: E402
from tests.test_run_cli import SPEC  # noqa: E402  (its problem, objectives and [sandbox])


def one_run(tmp_path: Path, name: str, evaluator) -> tuple:
    db = Database.open(tmp_path / name, DATABASE)
    db.add_initial(PROGRAM, evaluator.submit(PROGRAM).result())
    config = LoopConfig(iterations=10, seed=3, samples=2, batch=2, depth=2)
    run(Evolution(config, db), MutatePolicy(), evaluator)
    return snapshot(db)


@pytest.mark.slow
def test_ray_actors_give_the_same_run_as_the_process_pool(tmp_path):
    (tmp_path / "initial.py").write_text(PROGRAM)
    (tmp_path / "score.py").write_text(SCORER)
    (tmp_path / "problem.toml").write_text(SPEC)
    spec = specs.load(tmp_path / "problem.toml")
    with Sandbox.from_spec(spec) as pool:
        expected = one_run(tmp_path, "pool", pool)
    evaluator = RayEvaluator(spec)
    try:
        assert len(evaluator._actors) == 2
        crash = evaluator.submit("raise SystemExit(3)\n").result()
        assert crash.failure is not None  # failures come back as records, not exceptions
        got = one_run(tmp_path, "ray", evaluator)
    finally:
        evaluator.close()
    assert not ray.is_initialized()
    assert got == expected
    assert len(got[1]) > 5
