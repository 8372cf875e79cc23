"""Loop overhead: iterations/s with an instant policy and a trivial scorer, vs OpenEvolve.

    python tests/benchmarks/bench_loop_overhead.py [--quick]

Both systems talk to the same local OpenAI-compatible server, which answers every request
at once (each HTTP response in ONE write, so no Nagle / delayed-ACK stall) with a new
program (a fresh constant), and both evaluate the same scorer file in worker processes.
One iteration = one policy call with one sample = one child program, in both.

1. Population 1,000 and 10,000: the database is pre-filled with that many programs (ours:
   `Database.add_many`, island caps = population / islands; OpenEvolve: `database.add`,
   `population_size` = population), then K iterations are timed end to end.
2. Flatness (ours only): the steady-state cost per iteration with 1,000 and 100,000
   programs in the database, islands capped at the default 1,000 members.
`openevolve` is a benchmark-only dependency (`pip install openevolve`). The last line is
one JSON object.

    python tests/benchmarks/bench_loop_overhead.py --feedback [--quick] [--repeats N]

3. Feedback (ours only): on the function-minimization and circle-packing examples with the
   `mutate:` policy, the loop's own time per iteration (ask + tell + commit: prompts with
   their notes, parsing, duplicate keys, journal and database writes) with `[prompt]
   feedback` on and off. The evaluations (in the sandbox) are not timed; the policy's time
   is reported beside. A run's figure is the median over its policy calls (robust to the
   load spikes of a shared machine); runs alternate on/off (order swapped every repeat,
   after a warm-up run), same seed, this process pinned to one CPU and one BLAS thread, the
   run's database in /dev/shm (no disk flush noise). The examples' scorers are wrapped to
   add a feedback text (a summary of the scores, about 100 characters), and function
   minimization's evaluation budget is cut (1 seed, 100 calls) so a run takes seconds; the
   loop's work does not depend on it. Beside it, a low-noise figure: the milliseconds the
   notes add to building one prompt at their largest (every shown program with a full
   feedback text, the parent with two failed children), minimum over 200 builds; and, on
   each feedback-on run's final database, building a prompt with the switch on and off
   alternated 400 times (the only work the switch changes), medians.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import asyncio  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import socket  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from dataclasses import replace  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ISLANDS = 2
WORKERS = 2
BATCH = 4  # prompts per policy call (`evo run --batch`, the default)
PROGRAM = "# EVOLVE-BLOCK-START\nX = {x}\n# EVOLVE-BLOCK-END\n"
SCORER = '''
def evaluate(path):
    ns = {}
    exec(open(path).read(), ns)
    value = (int(ns["X"]) * 2654435761 % 1000) / 1000.0
    return {"score": value, "combined_score": value}
'''
SPEC = """
[problem]
name = "overhead"
program = "initial.py"
scorer = "score.py:evaluate"
objectives = ["score"]
[sandbox]
isolation = "process"
workers = %d
timeout = 10.0
[features.length]
source = "code_length"
range = [0, 100]
bins = 10
[search]
islands = %d
selection = "lexicase"
parents = 1
inspirations = 2
samples_per_prompt = 1
[prompt]
style = "full"
""" % (WORKERS, ISLANDS)


# -- the instant OpenAI-compatible server ---------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    counter = itertools.count(10**6)

    def log_message(self, *args) -> None:
        pass

    def _reply(self, payload: dict) -> None:
        body = json.dumps(payload).encode()
        head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                "Connection: keep-alive\r\n\r\n").encode()
        self.wfile.write(head + body)  # one write: no Nagle / delayed-ACK stall
        self.wfile.flush()

    def do_GET(self) -> None:
        self._reply({"object": "list", "data": [{"id": "instant", "object": "model"}]})

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        n = int(request.get("n", 1))
        texts = [f"```python\n{PROGRAM.format(x=next(self.counter))}```" for _ in range(n)]
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        if self.path.endswith("/chat/completions"):
            choices = [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                       for i, t in enumerate(texts)]
            kind = "chat.completion"
        else:
            choices = [{"index": i, "text": t, "finish_reason": "stop"} for i, t in enumerate(texts)]
            kind = "text_completion"
        self._reply({"id": "x", "object": kind, "created": 0, "model": "instant", "choices": choices, "usage": usage})


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default (5) drops concurrent connects: 1 s SYN retries
    daemon_threads = True


class InstantServer:
    def __init__(self) -> None:
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def problem_dir() -> Path:
    directory = Path(tempfile.mkdtemp(prefix="bench-loop-"))
    (directory / "initial.py").write_text(PROGRAM.format(x=1))
    (directory / "score.py").write_text(SCORER)
    (directory / "problem.toml").write_text(SPEC)
    return directory


def value(x: int) -> float:
    return (x * 2654435761 % 1000) / 1000.0


# -- ours ------------------------------------------------------------------------------------

def ours(server: InstantServer, population: int, iterations: int, cap: int | None = None) -> dict:
    """`cap`: members per island (default population / islands, like OpenEvolve's population_size)."""
    from evo import spec as specs
    from evo.database import Database, EvaluatedCandidate
    from evo.loop import Evolution, LoopConfig, run
    from evo.policies import load
    from evo.sandbox.pool import Sandbox
    from evo.scores import Evaluation

    directory = problem_dir()
    spec = specs.load(directory / "problem.toml")
    database = spec.database_config(seed=0)
    config = replace(database, search=replace(database.search, population_cap=cap or max(1, population // ISLANDS)))
    with Database.open(directory / "programs.sqlite", config) as db:
        for start in range(0, population, 5000):
            db.add_many([EvaluatedCandidate(PROGRAM.format(x=x), Evaluation(np.array([value(x)])), x % ISLANDS)
                         for x in range(start + 2, min(start + 5000, population) + 2)])
    db = Database.open(directory / "programs.sqlite", config)
    stamps: list[tuple[int, float]] = []  # (iterations committed, time)
    started = time.perf_counter()  # like OpenEvolve's run(): worker start-up is timed
    with Sandbox.from_spec(spec) as sandbox:
        policy = load(f"openai:{server.url}#instant")
        loop = LoopConfig(iterations=iterations, seed=0, samples=1, batch=BATCH, depth=2, style="full", max_new_tokens=64)
        run(Evolution(loop, db), policy, sandbox, lambda progress: stamps.append((progress.iteration, time.perf_counter())))
        wall = time.perf_counter() - started
    db.close()
    first = next(s for s in stamps if s[0] >= iterations // 5)  # after the warm-up
    steady = (stamps[-1][1] - first[1]) / (stamps[-1][0] - first[0])
    return {"iters_per_s": iterations / wall, "steady_ms": 1000 * steady}


# -- OpenEvolve ------------------------------------------------------------------------------

def openevolve(server: InstantServer, population: int, iterations: int) -> dict:
    from openevolve import OpenEvolve
    from openevolve.config import Config
    from openevolve.database import Program

    directory = problem_dir()
    config = Config.from_dict({
        "max_iterations": iterations, "checkpoint_interval": 10**9, "log_level": "ERROR", "random_seed": 0,
        "diff_based_evolution": False, "max_code_length": 100000,
        "llm": {"api_base": server.url, "models": [{"name": "instant", "weight": 1.0}], "api_key": "none",
                "timeout": 60, "retries": 0},
        "database": {"population_size": population, "num_islands": ISLANDS, "archive_size": 100},
        "evaluator": {"parallel_evaluations": WORKERS, "cascade_evaluation": False, "enable_artifacts": False,
                      "use_llm_feedback": False, "timeout": 60},
    })
    controller = OpenEvolve(str(directory / "initial.py"), str(directory / "score.py"), config,
                            output_dir=str(directory / "out"))
    for x in range(2, population + 2):
        score = value(x)
        program = Program(id=str(uuid.uuid4()), code=PROGRAM.format(x=x), metrics={"score": score, "combined_score": score})
        controller.database.add(program, iteration=0, target_island=x % ISLANDS)
    started = time.perf_counter()
    asyncio.run(controller.run(iterations=iterations))
    wall = time.perf_counter() - started
    return {"iters_per_s": iterations / wall}


# -- feedback on vs off ---------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FEEDBACK_SCORER = '''
import importlib.util, sys
spec = importlib.util.spec_from_file_location("example_score", {path!r})
example = importlib.util.module_from_spec(spec)
sys.modules["example_score"] = example
spec.loader.exec_module(example)
if hasattr(example, "SEEDS"):
    example.SEEDS, example.BUDGET = (0,), 100  # a short evaluation: only the loop is timed

def evaluate(path):
    scores = example.evaluate(path)
    shown = ", ".join(f"{{k}}={{v:.3f}}" for k, v in scores.items())
    return {{**scores, "feedback": f"per objective: {{shown}}; the weakest one limits the scalar"}}
'''


def feedback_problem(example: str) -> Path:
    """A copy of an example whose scorer adds feedback (and runs shorter)."""
    memory = "/dev/shm" if os.path.isdir("/dev/shm") else None  # no disk flush noise in the loop's time
    directory = Path(tempfile.mkdtemp(prefix=f"bench-feedback-{example}-", dir=memory))
    source = EXAMPLES / example
    (directory / "initial.py").write_text((source / "initial.py").read_text())
    (directory / "score.py").write_text(FEEDBACK_SCORER.format(path=str(source / "score.py")))
    text = (source / "problem.toml").read_text()
    (directory / "problem.toml").write_text(text)
    return directory


def loop_time(example: str, feedback: bool, iterations: int) -> dict:
    """One run with the mutate policy, driven synchronously: the seconds spent outside evaluation."""
    from evo import spec as specs
    from evo.database import Database
    from evo.loop import Evolution, LoopConfig
    from evo.policies import load
    from evo.sandbox.pool import Sandbox

    directory = feedback_problem(example)
    spec = specs.load(directory / "problem.toml")
    with Sandbox.from_spec(spec) as sandbox, Database.open(directory / "run", spec.database_config(0)) as db:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # after the workers started: they keep every CPU
        code = spec.problem.program.read_text()
        db.add_initial(code, sandbox.evaluate(code))
        evolution = Evolution(LoopConfig.for_spec(spec, 0, iterations=iterations, feedback=feedback), db, "mutate:")
        policy, groups, generating, shown = load("mutate:"), [], 0.0, 0  # groups: loop ms per iteration, per group
        while not evolution.done:
            started = time.perf_counter()
            group = evolution.ask()
            if group is None:
                evolution.commit()
                continue
            asked = time.perf_counter()
            replies = policy.generate(group.texts, **group.options)
            generated = time.perf_counter()
            candidates = evolution.tell(group, replies)
            spent = (asked - started) + (time.perf_counter() - generated)
            generating += generated - asked
            shown += sum(("Evaluator feedback" in t) + ("Previous attempt" in t) for t in group.texts)
            results = [f.result() for f in [sandbox.submit(c.code) for c in candidates]]
            started = time.perf_counter()
            evolution.commit(zip(candidates, results))
            groups.append(1000 * (spent + time.perf_counter() - started) / len(group.prompts))
        build = build_ab(evolution, iterations) if feedback else {}
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
        failures = sum(not p.ok for p in db.evaluated(ok_only=False))
    shutil.rmtree(directory, ignore_errors=True)
    return {"ms_per_iteration": statistics.median(groups), "policy_ms_per_iteration": 1000 * generating / iterations,
            "prompts_with_notes": shown, "failures": failures, **build}


def notes_cost(example: str, repeats: int = 200) -> float:
    """Milliseconds the notes add to building one prompt in the example's style: the parent
    and the inspirations each with a full-length feedback text, the parent with two failed
    children with long outputs (the most a prompt shows), minimum over repeats."""
    from evo import prompts, spec as specs
    from evo.feedback import FEEDBACK_CHARS, OUTPUT_CHARS
    from evo.prompts import Shown

    spec = specs.load(EXAMPLES / example / "problem.toml")
    code = spec.problem.program.read_text()
    failed = (("exception", "ZeroDivisionError: division by zero (at candidate.py:12)", "trace\n" * OUTPUT_CHARS),) * 2
    said = [Shown(code, 0.5, {"a": 0.5}, 1, "x" * FEEDBACK_CHARS, failed)] * (1 + spec.search.inspirations)
    plain = [Shown(code, 0.5, {"a": 0.5}, 1)] * (1 + spec.search.inspirations)
    best = {}
    for name, shown in (("on", said), ("off", plain)):
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            prompts.build(spec.prompt.style, shown[:1], shown[1:], rng=np.random.default_rng(0))
            times.append(time.perf_counter() - started)
        best[name] = 1000 * min(times)
    return best["on"] - best["off"]


def build_ab(evolution, iterations: int, rounds: int = 400) -> dict:
    """The only work the switch changes, measured head to head on the run's final database:
    building one prompt (sampling, notes, text) with feedback on and off, alternated."""
    import dataclasses

    times: dict[bool, list[float]] = {True: [], False: []}
    config = evolution.config
    for index in range(rounds):
        for feedback in ((True, False) if index % 2 else (False, True)):
            evolution.config = dataclasses.replace(config, feedback=feedback)
            started = time.perf_counter()
            evolution._build(index % iterations, 1, config.style)
            times[feedback].append(time.perf_counter() - started)
    evolution.config = config
    return {"build_on_ms": 1000 * statistics.median(times[True]), "build_off_ms": 1000 * statistics.median(times[False])}


def feedback_figures(iterations: int, repeats: int) -> dict:
    result: dict = {"name": "feedback_overhead", "repeats": repeats, "iterations": iterations}
    for example in ("function_minimization", "circle_packing"):
        runs: dict[bool, list[dict]] = {True: [], False: []}
        loop_time(example, True, 8)  # warm-up (imports, first evaluations), not counted
        for repeat in range(repeats):
            for feedback in ((True, False) if repeat % 2 == 0 else (False, True)):  # alternate the order
                runs[feedback].append(loop_time(example, feedback, iterations))
        on, off = median_of(runs[True], "ms_per_iteration"), median_of(runs[False], "ms_per_iteration")
        with_policy = [[r["ms_per_iteration"] + r["policy_ms_per_iteration"] for r in runs[f]] for f in (True, False)]
        notes = statistics.median(r["prompts_with_notes"] for r in runs[True])
        print(f"{example}: loop (ask + tell + commit) with feedback on {on[0]:.2f} ms/iteration [{on[1]:.2f}, {on[2]:.2f}], "
              f"off {off[0]:.2f} [{off[1]:.2f}, {off[2]:.2f}], ratio {on[0] / off[0]:.3f}; with the mutate policy's "
              f"time: on {statistics.median(with_policy[0]):.1f} ms, off {statistics.median(with_policy[1]):.1f} ms "
              f"(median {notes:.0f} notes shown per run with feedback on); ratio of the fastest runs "
              f"{on[1] / off[1]:.3f}", flush=True)
        build_on = statistics.median(r["build_on_ms"] for r in runs[True])
        build_off = statistics.median(r["build_off_ms"] for r in runs[True])
        print(f"{example}: head to head on the final database, building a prompt takes {build_on:.3f} ms with "
              f"feedback on, {build_off:.3f} off: +{build_on - build_off:.3f} ms, "
              f"{(build_on - build_off) / off[0]:.2%} of the loop's time per iteration", flush=True)
        result.update({f"{example}_build_on_ms": build_on, f"{example}_build_off_ms": build_off})
        added = notes_cost(example)
        print(f"{example}: the notes add {added:.3f} ms to building a prompt with the most they show "
              f"({added / off[0]:.1%} of the loop's {off[0]:.1f} ms per iteration with feedback off)", flush=True)
        result[f"{example}_notes_ms_per_prompt"] = added
        result.update({f"{example}_on_ms": on, f"{example}_off_ms": off, f"{example}_ratio": on[0] / off[0],
                       f"{example}_ratio_of_minima": on[1] / off[1],
                       f"{example}_with_policy_ratio": statistics.median(with_policy[0]) / statistics.median(with_policy[1])})
    result["ratio"] = max(result["function_minimization_ratio"], result["circle_packing_ratio"])
    return result


def median_of(runs: list[dict], key: str) -> tuple[float, float, float]:
    values = [r[key] for r in runs]
    return statistics.median(values), min(values), max(values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--feedback", action="store_true", help="only the feedback on/off figure")
    args = parser.parse_args()
    repeats = args.repeats or (1 if args.quick else 3)
    if args.feedback:
        print(json.dumps(feedback_figures(20 if args.quick else 60, repeats)))
        return
    ours_iterations, theirs_iterations = (200, 60) if args.quick else (600, 150)
    logging.disable(logging.CRITICAL)
    server = InstantServer()
    result: dict = {"name": "loop_overhead", "repeats": repeats}
    try:
        for population in (1000, 10000):
            mine = [ours(server, population, ours_iterations) for _ in range(repeats)]
            theirs = [openevolve(server, population, theirs_iterations) for _ in range(repeats)]
            m, t = median_of(mine, "iters_per_s"), median_of(theirs, "iters_per_s")
            tag = f"{population // 1000}k"
            print(f"population {population}: ours {m[0]:.1f} it/s [{m[1]:.1f}, {m[2]:.1f}], "
                  f"OpenEvolve {t[0]:.1f} it/s [{t[1]:.1f}, {t[2]:.1f}], ratio {m[0] / t[0]:.1f}x", flush=True)
            result.update({f"ours_iters_per_s_{tag}": m[0], f"baseline_iters_per_s_{tag}": t[0],
                           f"ratio_{tag}": m[0] / t[0], f"ours_steady_ms_{tag}": median_of(mine, "steady_ms")[0]})
        big = 20000 if args.quick else 100000
        small = median_of([ours(server, 1000, ours_iterations, cap=1000) for _ in range(repeats)], "steady_ms")
        large = median_of([ours(server, big, ours_iterations, cap=1000) for _ in range(repeats)], "steady_ms")
        print(f"database of {big} programs: {large[0]:.2f} ms/iteration [{large[1]:.2f}, {large[2]:.2f}] "
              f"vs {small[0]:.2f} [{small[1]:.2f}, {small[2]:.2f}] with 1,000 (islands capped at 1,000)", flush=True)
        result.update({"ours_steady_ms_db_1k": small[0], f"ours_steady_ms_db_{big // 1000}k": large[0],
                       "flatness": large[0] / small[0], "ratio": result["ratio_1k"]})
    finally:
        server.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
