"""Evaluations/s and per-evaluation overhead of the warm sandbox for a trivial scorer (it
loads the candidate and calls one function), against a fresh `python -c` per evaluation
(import the scorer, call it), in the same run; both isolation modes: "process" (the
default: the candidate in a process of its own, forgery-proof) and "shared" (one process).

    python tests/benchmarks/bench_sandbox.py [--quick] [--namespaces auto|on|off]

Settings: one evaluation at a time, back to back (the overhead per evaluation, since the
scorer itself takes microseconds); `--workers` in flight (throughput, both sides equally
parallel); and the latency of one evaluation when the sandbox had 20 ms to get ready. Wall time per evaluation, and CPU time per evaluation summed over every
process involved (a figure that other load on the machine disturbs less). Medians over
repeats, with [min, max]; the two sides are interleaved. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import psutil  # noqa: E402

from evo import spec  # noqa: E402
from evo.sandbox import Sandbox  # noqa: E402

SCORER = "from evo.sandbox import candidate\n\ndef score(path):\n    return [float(candidate.load(path).f())]\n"
CANDIDATE = "def f():\n    return 1\n"


def sandbox_cpu(box: Sandbox) -> float:
    """CPU seconds used so far by this process and the sandbox's zygotes and evaluations."""
    total = time.process_time()
    for worker in box._workers:
        zygote = psutil.Process(worker.proc.pid)
        for process in [zygote, *zygote.children(recursive=True)]:
            try:
                t = process.cpu_times()  # children_*: the evaluations already reaped
            except psutil.NoSuchProcess:  # (it ended since the listing: its parent's children_* count it)
                continue
            total += t.user + t.system + t.children_user + t.children_system
    return total


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + usage.ru_utime + usage.ru_stime


def ours(box: Sandbox, count: int, parallel: bool) -> tuple[float, float]:
    """Wall seconds and CPU seconds (all processes involved) per evaluation."""
    cpu, start = sandbox_cpu(box), time.perf_counter()
    if parallel:
        results = [f.result() for f in [box.submit(CANDIDATE) for _ in range(count)]]
    else:
        results = [box.evaluate(CANDIDATE) for _ in range(count)]
    elapsed = time.perf_counter() - start
    assert all(r.ok for r in results), results[0]
    return elapsed / count, (sandbox_cpu(box) - cpu) / count


def latency(box: Sandbox, count: int, gap: float = 0.02) -> float:
    """Seconds from evaluate() to its result when the sandbox had a moment to get ready
    (as in a search loop, where generation takes longer than evaluation)."""
    times = []
    for _ in range(count):
        time.sleep(gap)
        start = time.perf_counter()
        assert box.evaluate(CANDIDATE).ok
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fresh_spawn(directory: Path, count: int, workers: int) -> tuple[float, float]:
    """Wall and CPU seconds per evaluation when every evaluation is a new `python -c`."""
    candidate = directory / "candidate.py"
    code = (f"import sys; sys.path[:0] = [{str(directory)!r}, {str(ROOT)!r}]; from trivial import score; "
            f"print(score({str(candidate)!r}))")

    def one(_: int) -> None:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.strip() == "[1.0]", out

    cpu, start = children_cpu(), time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(count)))
    return (time.perf_counter() - start) / count, (children_cpu() - cpu) / count


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer evaluations and repeats")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--namespaces", default="auto", choices=["auto", "on", "off"])
    args = parser.parse_args()
    repeats, count, spawns = (3, 60, 15) if args.quick else (5, 300, 40)

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (directory / "trivial.py").write_text(SCORER)
        (directory / "candidate.py").write_text(CANDIDATE)
        keys = ("ours_seq", "ours_par", "base_seq", "base_par", "shared_seq")
        rows: dict[str, list[tuple[float, float]]] = {k: [] for k in keys}
        idle: list[float] = []
        shared_idle: list[float] = []
        one = spec.SandboxLimits(workers=1, timeout=10.0, memory_mb=256)
        many = spec.SandboxLimits(workers=args.workers, timeout=10.0, memory_mb=256)
        shared = spec.SandboxLimits(workers=1, timeout=10.0, memory_mb=256, isolation="shared")
        scorer = f"{directory / 'trivial.py'}:score"
        with Sandbox(scorer, ["x"], one, namespaces=args.namespaces) as box1, \
                Sandbox(scorer, ["x"], many, namespaces=args.namespaces) as boxn, \
                Sandbox(scorer, ["x"], shared, namespaces=args.namespaces) as box_shared:
            mode = box1.mode
            ours(box1, 20, False), ours(boxn, 20, True), ours(box_shared, 20, False)  # warm up
            for _ in range(repeats):  # interleaved, so machine load hits all sides alike
                rows["ours_seq"].append(ours(box1, count, parallel=False))
                rows["shared_seq"].append(ours(box_shared, count, parallel=False))
                rows["base_seq"].append(fresh_spawn(directory, spawns, 1))
                rows["ours_par"].append(ours(boxn, count, parallel=True))
                rows["base_par"].append(fresh_spawn(directory, spawns, args.workers))
                idle.append(latency(box1, count // 5) * 1000)
                shared_idle.append(latency(box_shared, count // 5) * 1000)

    ms = {k: summary([wall * 1000 for wall, _ in vs]) for k, vs in rows.items()}
    cpu = {k: summary([c * 1000 for _, c in vs]) for k, vs in rows.items()}
    rate = {k: 1000 / ms[k]["median"] for k in ms}
    print(f"isolation: {mode}; {repeats} repeats; {count} sandbox / {spawns} spawned evaluations per repeat")
    for key, label in [("ours_seq", "sandbox, 1 at a time"), ("shared_seq", "sandbox shared, 1 at a time"),
                       ("base_seq", "python -c, 1 at a time"),
                       ("ours_par", f"sandbox, {args.workers} in flight"), ("base_par", f"python -c, {args.workers} in flight")]:
        m, c = ms[key], cpu[key]
        print(f"{label:28s} {m['median']:8.2f} ms/eval [{m['min']:.2f}, {m['max']:.2f}]  {rate[key]:8.1f} evals/s"
              f"  CPU {c['median']:6.2f} ms/eval [{c['min']:.2f}, {c['max']:.2f}]")
    lat, shared_lat = summary(idle), summary(shared_idle)
    print(f"sandbox latency when ready  {lat['median']:8.2f} ms/eval [{lat['min']:.2f}, {lat['max']:.2f}]")
    print(f"shared latency when ready   {shared_lat['median']:8.2f} ms/eval [{shared_lat['min']:.2f}, {shared_lat['max']:.2f}]")
    print(json.dumps({
        "name": "sandbox",
        "isolation": mode,
        "ours_evals_per_s": round(rate["ours_seq"], 1),
        "baseline_evals_per_s": round(rate["base_seq"], 1),
        "ratio": round(rate["ours_seq"] / rate["base_seq"], 2),
        "ours_ms_per_eval": round(ms["ours_seq"]["median"], 3),
        "ours_ms_per_eval_range": [round(ms["ours_seq"]["min"], 3), round(ms["ours_seq"]["max"], 3)],
        "ours_latency_ms": round(lat["median"], 3),
        "shared_ms_per_eval": round(ms["shared_seq"]["median"], 3),
        "shared_latency_ms": round(shared_lat["median"], 3),
        "shared_cpu_ms": round(cpu["shared_seq"]["median"], 3),
        "process_over_shared_ms": round(ms["ours_seq"]["median"] - ms["shared_seq"]["median"], 3),
        "baseline_ms": round(ms["base_seq"]["median"], 3),
        "ours_cpu_ms": round(cpu["ours_seq"]["median"], 3),
        "baseline_cpu_ms": round(cpu["base_seq"]["median"], 3),
        "load_average": round(os.getloadavg()[0], 2),
        "workers": args.workers,
        "ours_parallel_evals_per_s": round(rate["ours_par"], 1),
        "baseline_parallel_evals_per_s": round(rate["base_par"], 1),
        "parallel_ratio": round(rate["ours_par"] / rate["base_par"], 2),
    }))


if __name__ == "__main__":
    main()
