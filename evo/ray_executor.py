"""Evaluation workers as Ray actors (`evo run --executor ray`).

Each actor holds a one-worker `Sandbox` built from the spec, so an evaluation is isolated
exactly as with the process pool and returns the same `Evaluation`. `submit` hands the
candidate to the least busy actor and returns a concurrent.futures.Future, like the pool.
On a cluster, the scorer and initial program paths must exist on every node.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from evo import spec as specs
from evo.errors import UserError
from evo.scores import Evaluation


class _Worker:
    """The actor body: a one-worker evaluator for the spec (as `--executor process` builds it)."""

    def __init__(self, spec: specs.Spec) -> None:
        from evo.sandbox.pool import Sandbox

        self.sandbox = Sandbox.from_spec(replace(spec, sandbox=replace(spec.sandbox, workers=1)))

    def evaluate(self, code: str) -> Evaluation:
        return self.sandbox.evaluate(code)

    def close(self) -> None:
        self.sandbox.close()


class RayEvaluator:
    def __init__(self, spec: specs.Spec, workers: int | None = None, address: str | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise UserError("--executor ray needs Ray: pip install 'vpo-evo[ray]'") from None
        self._ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            count = workers or spec.sandbox.workers
            ray.init(address=address, num_cpus=None if address else count, include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        actor = ray.remote(num_cpus=1)(_Worker)
        self._actors: list[Any] = [actor.remote(spec) for _ in range(workers or spec.sandbox.workers)]  # actor handles
        self._busy = [0] * len(self._actors)
        self._lock = threading.Lock()

    def submit(self, code: str) -> Future:
        with self._lock:
            index = min(range(len(self._actors)), key=self._busy.__getitem__)
            self._busy[index] += 1
        future = self._actors[index].evaluate.remote(code).future()
        future.add_done_callback(lambda _, i=index: self._done(i))
        return future

    def _done(self, index: int) -> None:
        with self._lock:
            self._busy[index] -= 1

    def evaluate(self, code: str) -> Evaluation:
        return self.submit(code).result()

    def close(self) -> None:
        ray = self._ray
        for actor in self._actors:
            try:
                ray.get(actor.close.remote(), timeout=10)
            except Exception:  # an actor that died already has nothing to close
                pass
            ray.kill(actor)
        self._actors = []
        if self._started and ray.is_initialized():
            ray.shutdown()
