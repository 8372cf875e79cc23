"""Evaluation of programs that are not Python (a maze route file, a config, ...).

The sandbox's pool rejects every candidate that does not compile as Python, which is
right for `.py` programs and wrong for text ones. For a spec whose program is not a `.py`
file and whose `[sandbox] isolation` is "none" (a trusted, pure scorer), this evaluator
writes the candidate with the program's suffix and calls the scorer in this process,
through the sandbox's own scorer loader and result validation.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from evo import spec as specs
from evo.errors import UserError
from evo.features import required_extras
from evo.sandbox.child import evaluate as call_scorer
from evo.sandbox.loader import ScorerError, load_scorer
from evo.scores import Evaluation


def needs_text_evaluator(spec: specs.Spec) -> bool:
    return spec.problem.program.suffix != ".py" and spec.sandbox.isolation == "none"


class TextEvaluator:
    def __init__(self, spec: specs.Spec) -> None:
        try:
            self._scorer = load_scorer(spec.problem.scorer, str(spec.path.parent))
        except ScorerError as error:
            raise UserError(str(error)) from None
        self._objectives = spec.problem.objectives
        self._required = required_extras(spec.features)
        self._path = Path(tempfile.mkdtemp(prefix="evo-text-")) / f"candidate{spec.problem.program.suffix}"
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="evo-text-eval")

    def submit(self, code: str) -> "Future[Evaluation]":
        return self._executor.submit(self._evaluate, code)

    def evaluate(self, code: str) -> Evaluation:
        return self.submit(code).result()

    def _evaluate(self, code: str) -> Evaluation:
        start = time.monotonic()
        self._path.write_text(code, encoding="utf-8")
        reply = call_scorer(self._scorer, str(self._path), self._objectives, self._required)
        seconds = time.monotonic() - start
        if "failure" in reply:
            kind, message = reply["failure"]
            return Evaluation.failed(kind, message, seconds)
        import numpy as np

        return Evaluation(np.asarray(reply["scores"], dtype=np.float64), extras=reply["extras"], seconds=seconds)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self._path.parent, ignore_errors=True)
