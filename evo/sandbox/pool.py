"""`Sandbox`: evaluate candidate programs with a problem's scorer, several at a time."""

from __future__ import annotations

import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from evo import spec as spec_module
from evo.errors import UserError
from evo.features import required_extras
from evo.sandbox.child import evaluate as evaluate_in_process
from evo.sandbox.loader import ScorerError, absolute, load_stages
from evo.sandbox.worker import Worker
from evo.scores import FAILURE_KINDS, BadOutput, Evaluation, feedback_text, to_vector


class Sandbox:
    """Evaluates candidates: `evaluate(code)`, `submit(code) -> Future[Evaluation]`, `close()`.

    isolation "process": warm zygote workers fork, per evaluation, a confined process for the
    scorer and another for the candidate, which the scorer reaches through
    evo.sandbox.candidate (see docs/sandbox.md); "shared": one process for both (faster,
    but the candidate can forge its score); "none": the trusted scorer runs in this process.
    `namespaces`: "auto" (use them when root and available), "on" (required) or "off"
    (force the rlimits + process-group fallback). `suffix`: the candidate file's suffix
    (the initial program's); only ".py" candidates are checked with compile() first.
    `cascade`: later scorer stages, (ref, threshold) each; a stage runs only when the scalar
    (by `weights`; default equal) of the previous stage's vector reaches its threshold.
    """

    def __init__(
        self,
        scorer: str | Callable[[str], Any],
        objectives: Sequence[str],
        limits: spec_module.SandboxLimits = spec_module.SandboxLimits(),
        *,
        required: Sequence[str] = (),
        search_path: str | None = None,
        suffix: str = ".py",
        namespaces: str = "auto",
        drop_privileges: bool = True,
        memory_cgroup: bool = True,
        cascade: Sequence[tuple[str, float]] = (),
        weights: Sequence[float] | None = None,
        minimize: Sequence[str] = (),
    ):
        if namespaces not in ("auto", "on", "off"):
            raise ValueError(f"namespaces must be 'auto', 'on' or 'off', not {namespaces!r}")
        self.objectives, self.limits, self.required = tuple(objectives), limits, tuple(required)
        self.minimize = tuple(minimize)  # objectives the scorer reports lower-is-better (negated in the vector)
        self.cascade: list[list[Any]] = [[ref, float(threshold)] for ref, threshold in cascade]  # [ref, threshold]
        self.weights = [float(w) for w in weights] if weights is not None else [1.0] * len(self.objectives)
        self.filename = f"candidate{suffix}"  # a program that is not Python is not compiled first
        self._scratch = Path(tempfile.mkdtemp(prefix="evo-sandbox-"))
        self._scratch.chmod(0o711)  # the (unprivileged) evaluation must reach its own directory
        self._idle: queue.Queue[Worker] = queue.Queue()
        self._workers: list[Worker] = []
        self._scorer: Any = None
        self._closed = False
        self._lock = threading.Lock()  # a trusted in-process scorer runs one call at a time
        try:
            if isinstance(scorer, str):  # a relative scorer file is the caller's, not the worker's directory's
                scorer = absolute(scorer)
                self.cascade = [[absolute(ref), threshold] for ref, threshold in self.cascade]
            if callable(scorer) and limits.isolation != "none":
                raise ScorerError("a Python function as the scorer runs in this process (isolation 'none'); "
                                  "for a sandbox, name it as 'file.py:function'")
            if limits.isolation == "none":
                self._scorer = scorer if callable(scorer) else load_stages(scorer, self.cascade, self.weights, search_path)
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="evo-eval")
            else:
                assert isinstance(scorer, str)  # a function was refused above
                self._start_workers(scorer, search_path, namespaces, drop_privileges, memory_cgroup)
                self._executor = ThreadPoolExecutor(limits.workers, thread_name_prefix="evo-eval")
        except ScorerError as error:
            self.close()
            raise UserError(str(error)) from None

    @classmethod
    def from_spec(cls, spec: spec_module.Spec, **options: Any) -> "Sandbox":
        return cls(
            spec.problem.scorer, spec.problem.objectives, spec.sandbox,
            required=required_extras(spec.features), search_path=str(spec.path.parent),
            suffix=spec.problem.program.suffix, cascade=spec.problem.cascade, weights=spec.problem.weights,
            minimize=spec.problem.minimize,
            **options,
        )

    def _start_workers(self, scorer: str, search_path: str | None, namespaces: str, drop: bool, use_cgroup: bool) -> None:
        config = {
            "scorer": scorer, "cascade": self.cascade, "weights": self.weights, "search_path": search_path, "objectives": list(self.objectives),
            "minimize": list(self.minimize),
            "required_extras": list(self.required), "timeout": self.limits.timeout,
            "cpu_limit": self.limits.cpu_limit, "memory_mb": self.limits.memory_mb,
            "max_processes": self.limits.max_processes, "output_bytes": self.limits.output_bytes,
            "namespaces": namespaces, "drop_privileges": drop, "filename": self.filename,
            "isolation": self.limits.isolation, "use_cgroup": use_cgroup, "env": list(self.limits.env),
        }
        self._workers = [Worker(config, self._scratch / f"w{i}") for i in range(self.limits.workers)]
        for worker in self._workers:
            worker.launch()  # all import the scorer at the same time
        for worker in self._workers:
            worker.wait_ready()
            self._idle.put(worker)

    @property
    def mode(self) -> str:
        """How evaluations are isolated: 'namespaces', 'rlimits' (the fallback) or 'none'."""
        return self._workers[0].mode if self._workers else "none"

    def evaluate(self, code: str) -> Evaluation:
        """Evaluate in the calling thread (one hop less than `submit(code).result()`)."""
        return self._evaluate(code)

    def submit(self, code: str) -> "Future[Evaluation]":
        return self._executor.submit(self._evaluate, code)

    def _evaluate(self, code: str) -> Evaluation:
        failure = _syntax_error(code) if self.filename.endswith(".py") else _text_error(code)
        if failure is not None:
            return failure
        if self._scorer is not None:
            return self._in_process(code)
        if self._closed:
            raise RuntimeError("the sandbox is closed")
        worker = self._idle.get()
        try:
            reply = worker.evaluate(code)
        except ScorerError as error:  # a replacement worker could not load the scorer any more
            raise UserError(str(error)) from None
        finally:
            self._idle.put(worker)
        return self._to_evaluation(reply)

    def _in_process(self, code: str) -> Evaluation:
        start = time.monotonic()
        with self._lock, tempfile.TemporaryDirectory(prefix="eval-", dir=self._scratch) as workdir:
            path = Path(workdir) / self.filename
            path.write_text(code, encoding="utf-8")
            reply = evaluate_in_process(self._scorer, str(path), self.objectives, self.required, self.minimize)
        reply["seconds"] = time.monotonic() - start
        return self._to_evaluation(reply)

    def _to_evaluation(self, reply: Any) -> Evaluation:
        """Re-validate what came back over the pipe (the candidate could have written it),
        in time linear in its (bounded) size; anything malformed is `bad_output`."""
        if not isinstance(reply, dict):
            return Evaluation.failed("bad_output", f"malformed evaluation result: a {type(reply).__name__}")
        seconds, output, stage = reply.get("seconds", 0.0), reply.get("output", ""), reply.get("stage", 0)
        seconds = float(seconds) if isinstance(seconds, (int, float)) and 0 <= seconds < 1e9 else 0.0
        output = output if isinstance(output, str) else ""
        stage = stage if type(stage) is int and 0 <= stage <= len(self.cascade) + 1 else 0
        try:
            feedback = feedback_text(reply.get("feedback", ""))  # a failure's too: the scorer's artifacts
            if "failure" in reply:
                failure = reply["failure"]
                if not (isinstance(failure, list) and len(failure) == 2 and all(isinstance(f, str) for f in failure)):
                    raise BadOutput("a failure is [kind, message]")
                kind, message = failure
                if kind not in FAILURE_KINDS:
                    raise BadOutput(f"unknown failure kind {kind[:40]!r}")
                return Evaluation.failed(kind, message[:2000], seconds, output, stage, feedback)
            if not isinstance(reply.get("scores"), list) or not isinstance(reply.get("extras", {}), dict):
                raise BadOutput("no score list")
            scores, _ = to_vector(reply["scores"], self.objectives)
            _, extras = to_vector({**reply.get("extras", {}), **dict(zip(self.objectives, scores))}, self.objectives)
        except BadOutput as error:
            return Evaluation.failed("bad_output", f"malformed evaluation result: {error}", seconds, output, stage)
        return Evaluation(scores=scores, extras=extras, seconds=seconds, output=output, feedback=feedback, stage=stage)

    def close(self) -> None:
        self._closed = True
        executor = getattr(self, "_executor", None)
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        for worker in self._workers:
            worker.kill()
        self._workers = []
        shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _syntax_error(code: str) -> Evaluation | None:
    try:
        compile(code, "candidate.py", "exec", dont_inherit=True)
    except SyntaxError as error:
        where = f"line {error.lineno}: " if error.lineno else ""
        return Evaluation.failed("syntax", f"{where}{error.msg}")
    except (ValueError, RecursionError, MemoryError, OverflowError) as error:
        return Evaluation.failed("syntax", f"{type(error).__name__}: {error}")
    return None


def _text_error(code: str) -> Evaluation | None:
    try:
        code.encode("utf-8")
    except UnicodeEncodeError as error:
        return Evaluation.failed("syntax", f"the candidate is not valid text: {error}")
    return None
