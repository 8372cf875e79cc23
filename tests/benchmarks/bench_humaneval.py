"""HumanEval tests per second: `Task.score` through its sandbox (each test on a fresh copy of
the candidate's process, judged on the scorer's side) against the harness it replaced, in
the same run: each test forked from the caller's own process (unsandboxed, forgeable),
loaded from git (`--baseline-rev`, the commit before the change).

    python tests/benchmarks/bench_humaneval.py [--quick] [--problems N] [--caller-mb MB] [--baseline-rev REV]

The reference answers of the first N problems (every test passes, so every test runs to its
end), scored one answer at a time, all answers at once (the sandbox's workers in flight;
the old harness has no parallelism of its own), and as a training step's single-answer
completions (`score_many`, one thread per sandbox worker). Wall-clock medians over repeats, with
[min, max]; the sides are interleaved; thread counts pinned to 1. The sandbox's start (its
workers import the scorer) is reported apart. `--caller-mb` makes the calling process hold
that much touched memory first, as a trainer holds its model: the old harness forked that
process for every test; the sandbox's cost does not depend on it. The last line is one JSON
object.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
sys.path.insert(0, str(ROOT))

import tasks  # noqa: E402
from tasks.completions import score_many  # noqa: E402
from tasks.humaneval import formats  # noqa: E402


def old_harness(rev: str):
    """The module `tasks/humaneval/run.py` as it was at `rev` (run_tests(program, tests, timeout))."""
    source = subprocess.run(["git", "show", f"{rev}:tasks/humaneval/run.py"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout
    path = Path(tempfile.mkdtemp()) / "old_run.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_humaneval_run", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def summary(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1), "max": round(max(values), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer problems and repeats")
    parser.add_argument("--problems", type=int, default=0, help="how many problems (default 40, quick 12)")
    parser.add_argument("--caller-mb", type=int, default=0, help="memory the calling process holds (a trainer's model)")
    parser.add_argument("--baseline-rev", default="6126dbd", help="the commit whose harness is the baseline")
    args = parser.parse_args()
    ballast = bytearray(args.caller_mb << 20)
    for offset in range(0, len(ballast), 4096):  # touched: the pages are really there
        ballast[offset] = 1
    count = args.problems or (12 if args.quick else 40)
    repeats = 3 if args.quick else 5

    task = tasks.get("humaneval")
    instances = task.instances("train", count)
    answers = [i.data.prompt + i.data.canonical for i in instances]
    tests = sum(task.tests(i) for i in instances)
    old = old_harness(args.baseline_rev)

    def before() -> float:
        start = time.perf_counter()
        for inst, answer in zip(instances, answers):
            passed = old.run_tests(formats.program(inst.data, answer), inst.data.tests, task.timeout)
            assert all(passed), inst.data.task_id
        return tests / (time.perf_counter() - start)

    def after_one_at_a_time() -> float:
        start = time.perf_counter()
        for inst, answer in zip(instances, answers):
            assert task.score(inst, [answer])[0].min() == 1.0, inst.data.task_id
        return tests / (time.perf_counter() - start)

    def after_all_at_once() -> float:
        from tasks.humaneval.scoring import program_text

        sandbox = task._scorer._started()
        start = time.perf_counter()
        futures = [sandbox.submit(program_text(i.data, a, task.timeout)) for i, a in zip(instances, answers)]
        assert all(f.result().scores.min() == 1.0 for f in futures)
        return tests / (time.perf_counter() - start)

    def after_rollouts() -> float:
        """A step's single-answer completions as training scores them (score_many: one thread per worker)."""
        rows = [(i, formats.fenced(a), True) for i, a in zip(instances, answers)]
        start = time.perf_counter()
        matrices, parsed = score_many(task, rows, 1)
        assert parsed.all() and matrices.min() == 1.0
        return tests / (time.perf_counter() - start)

    start = time.perf_counter()
    task.score(instances[0], [answers[0]])  # starts the sandbox
    startup = time.perf_counter() - start
    rows: dict[str, list[float]] = {"before": [], "after": [], "after_parallel": [], "after_rollouts": []}
    for _ in range(repeats):
        rows["before"].append(before())
        rows["after"].append(after_one_at_a_time())
        rows["after_parallel"].append(after_all_at_once())
        rows["after_rollouts"].append(after_rollouts())
    task.close()

    figures = {key: summary(values) for key, values in rows.items()}
    print(f"{count} problems, {tests} tests, {repeats} repeats, the caller holding {args.caller_mb} MB; "
          f"load average {os.getloadavg()[0]:.2f}")
    for key, label in [("before", "old harness (unsandboxed)"), ("after", "sandbox, one answer at a time"),
                       ("after_parallel", "sandbox, all answers at once"),
                       ("after_rollouts", "sandbox, rollouts (score_many)")]:
        f = figures[key]
        print(f"{label:32s} {f['median']:8.1f} tests/s [{f['min']:.1f}, {f['max']:.1f}]")
    print(f"sandbox start: {startup:.2f} s")
    print(json.dumps({
        "name": "humaneval",
        "tests": tests,
        "ours_tests_per_s": figures["after"]["median"],
        "ours_tests_per_s_range": [figures["after"]["min"], figures["after"]["max"]],
        "ours_parallel_tests_per_s": figures["after_parallel"]["median"],
        "ours_rollouts_tests_per_s": figures["after_rollouts"]["median"],
        "baseline_tests_per_s": figures["before"]["median"],
        "baseline_tests_per_s_range": [figures["before"]["min"], figures["before"]["max"]],
        "ratio": round(figures["after"]["median"] / figures["before"]["median"], 2),
        "sandbox_start_s": round(startup, 2),
        "caller_mb": args.caller_mb,
        "load_average": round(os.getloadavg()[0], 2),
    }))


if __name__ == "__main__":
    main()
