"""The sandbox with real zygote processes: both isolation modes, limits, concurrency."""

import json
import os
import platform
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from evo import spec
from evo.errors import UserError
from evo.sandbox import Sandbox
from evo.sandbox.isolation import namespaces_available

ROOT = Path(__file__).resolve().parents[1]
RUNNER = """
from evo.sandbox import candidate

def evaluate(path):
    program = candidate.load(path)
    return program.result() if "result" in dir(program) else {"a": 1.0, "b": 0.5}
"""
needs_root = pytest.mark.skipif(not namespaces_available(), reason="namespaces need root (and a kernel that allows them)")


def scorer(tmp_path: Path, body: str = RUNNER, name: str = "score.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return f"{path}:evaluate"


def sandbox(tmp_path: Path, namespaces: str = "off", body: str = RUNNER, **limits) -> Sandbox:
    limits = {"workers": 1, "timeout": 5.0, "memory_mb": 256, **limits}
    return Sandbox(scorer(tmp_path, body), ("a", "b"), spec.SandboxLimits(**limits), namespaces=namespaces)


def descendants() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)


@pytest.mark.parametrize("mode", [pytest.param("on", marks=needs_root), "off"])
def test_evaluates_and_captures_output(tmp_path, mode):
    with sandbox(tmp_path, mode) as box:
        assert box.mode == {"on": "namespaces", "off": "rlimits"}[mode]
        code = "print('hello from the candidate')\ndef result():\n    return {'a': 0.25, 'b': 2, 'extra': 7}\n"
        evaluation = box.evaluate(code)
    assert evaluation.ok, evaluation.failure
    assert np.array_equal(evaluation.scores, [0.25, 2.0]) and evaluation.scores.dtype == np.float64
    assert evaluation.extras == {"extra": 7.0}
    assert "hello from the candidate" in evaluation.output and evaluation.seconds > 0


PROBE = """
import os, socket
def result():
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
        network = 1.0
    except OSError:
        network = 0.0
    try:
        open("/tmp/evo-probe-PORT", "w").close()
        wrote_tmp = 1.0
    except OSError:
        wrote_tmp = 0.0
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    return {"a": 1, "b": 1, "uid": os.getuid(), "ppid": os.getppid(), "pids": len(pids),
            "network": network, "wrote_tmp": wrote_tmp, "own_group": float(os.getpgid(0) == os.getpid())}
"""


@needs_root
def test_namespaces_hide_network_processes_and_the_filesystem(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with sandbox(tmp_path, "on") as box:
            evaluation = box.evaluate(PROBE.replace("PORT", str(port)))
    assert evaluation.ok, evaluation.failure
    e = evaluation.extras
    assert e["network"] == 0.0  # a fresh network namespace: the host's listener is unreachable
    assert e["wrote_tmp"] == 0.0 and not Path(f"/tmp/evo-probe-{port}").exists()
    assert e["ppid"] == 1 and e["pids"] <= 3  # PID 1 is the zygote; the search is not visible
    assert e["uid"] >= 0x5E000000 and e["own_group"] == 1.0


def test_fallback_confines_with_a_user_a_process_group_and_seccomp(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with sandbox(tmp_path, "off") as box:
            probe = PROBE.replace("PORT", str(port)).replace(f"/tmp/evo-probe-{port}", str(ROOT / "probe"))
            evaluation = box.evaluate(probe)
    assert evaluation.ok, evaluation.failure
    if platform.machine() in ("x86_64", "aarch64"):
        assert evaluation.extras["network"] == 0.0
    assert evaluation.extras["uid"] >= 0x5E000000 if os.geteuid() == 0 else evaluation.extras["uid"] == os.getuid()
    assert evaluation.extras["own_group"] == 1.0
    if os.geteuid() == 0:
        assert evaluation.extras["wrote_tmp"] == 0.0 and not (ROOT / "probe").exists()


def test_several_evaluations_in_flight(tmp_path):
    slow = RUNNER.replace("def evaluate(path):", "def evaluate(path):\n    import time; time.sleep(1.0)")
    with sandbox(tmp_path, body=slow, workers=3) as box:
        start = time.monotonic()
        futures = [box.submit(f"x = {i}") for i in range(3)]
        results = [future.result() for future in futures]
        elapsed = time.monotonic() - start
    assert all(r.ok for r in results)
    assert elapsed < 2.4, f"3 evaluations of 1 s took {elapsed:.2f} s on 3 workers (one at a time: 3 s)"


def test_wall_timeout_kills_and_the_sandbox_keeps_serving(tmp_path):
    # A CPU cap well above the wall limit, so the wall clock (not RLIMIT_CPU) decides on an idle machine.
    with sandbox(tmp_path, timeout=1.0, cpu_seconds=30.0) as box:
        start = time.monotonic()
        evaluation = box.evaluate("while True:\n    pass\n")
        assert time.monotonic() - start < 8.0  # the zygote kills it (the backstop would wait 11 s)
        assert evaluation.failure.kind == "timeout" and "wall-clock" in evaluation.failure.message
        assert box.evaluate("x = 1").ok


@pytest.mark.parametrize("mode", [pytest.param("on", marks=needs_root), "off"])
def test_a_result_written_by_a_shared_candidate_that_runs_on_is_a_timeout(tmp_path, mode):
    """With isolation "shared" the candidate holds the result pipe: a whole frame there does
    not end the evaluation (with "process", where only the scorer's process holds it, the
    zygote answers at the frame); the process must still finish in time."""
    forge = ("import os, struct, time\n"
             "data = b'{\"scores\": [9.0, 9.0], \"extras\": {}}'\n"
             "os.write(3, struct.pack('>I', len(data)) + data)\n"
             "time.sleep(60)\n")
    with sandbox(tmp_path, mode, isolation="shared", timeout=2.0) as box:
        evaluation = box.evaluate(forge)
        assert not evaluation.ok and evaluation.failure.kind == "timeout", evaluation
        assert box.evaluate("x = 1\n").ok  # (and it keeps serving)


def test_cpu_time_limit_is_a_timeout(tmp_path):
    with sandbox(tmp_path, timeout=30.0, cpu_seconds=1.0) as box:
        evaluation = box.evaluate("while True:\n    pass\n")
    assert evaluation.failure.kind == "timeout" and "CPU" in evaluation.failure.message


def test_output_is_truncated(tmp_path):
    with sandbox(tmp_path, output_bytes=1000) as box:
        evaluation = box.evaluate("import sys\nfor _ in range(100):\n    sys.stdout.write('y' * 10000)\n")
    assert evaluation.ok
    kept, _, note = evaluation.output.partition("\n[...")
    assert len(kept) == 1000 and "999000 more bytes of output dropped" in note


def test_each_evaluation_gets_a_fresh_directory(tmp_path):
    with sandbox(tmp_path) as box:
        assert box.evaluate("open('left-behind.txt', 'w').write('x')").ok
        listing = box.evaluate("import os\ndef result():\n    return {'a': len(os.listdir('.')), 'b': float('left-behind.txt' in os.listdir('.'))}")
    assert listing.ok, listing.failure
    assert listing.scores[1] == 0.0 and not any(tmp_path.rglob("left-behind.txt"))


def test_scorer_problems_are_one_line_user_errors(tmp_path):
    with pytest.raises(UserError, match="cannot import scorer .*ZeroDivisionError") as info:
        sandbox(tmp_path, body="1 / 0\n")
    assert "\n" not in str(info.value)
    with pytest.raises(UserError, match="has no function 'evaluate'"):
        sandbox(tmp_path, body="def other(path):\n    return [1, 1]\n")
    assert descendants() == []


def test_a_dead_worker_is_replaced(tmp_path):
    with sandbox(tmp_path) as box:
        assert box.evaluate("x = 1").ok
        zygote = box._workers[0].proc
        os.killpg(zygote.pid, signal.SIGKILL)
        zygote.wait()
        evaluation = box.evaluate("x = 2")
        assert evaluation.ok and box._workers[0].proc.pid != zygote.pid


def test_syntax_errors_never_reach_a_worker(tmp_path):
    with sandbox(tmp_path) as box:
        evaluation = box.evaluate("def broken(:\n")
    assert evaluation.failure.kind == "syntax" and "line 1" in evaluation.failure.message
    assert evaluation.seconds == 0.0


def test_isolation_none_runs_in_process(tmp_path):
    with sandbox(tmp_path, isolation="none") as box:
        assert box.mode == "none" and descendants() == []
        ok = box.evaluate("def result():\n    return [0.5, 0.5]\n")
        raised = box.evaluate("raise ValueError('nope')\n")
        bad = box.evaluate("def result():\n    return [0.5]\n")
    assert ok.ok and ok.scores.tolist() == [0.5, 0.5]
    assert raised.failure.kind == "exception" and "ValueError: nope" in raised.failure.message
    assert bad.failure.kind == "bad_output"


def test_from_spec_runs_the_example_and_close_leaves_nothing(tmp_path):
    example = spec.load(ROOT / "examples" / "function_minimization" / "problem.toml")
    box = Sandbox.from_spec(example.override({"sandbox.workers": 1}))
    scratch, memory_cgroup = box._scratch, box._workers[0].cgroup
    evaluation = box.evaluate(example.problem.program.read_text())
    assert evaluation.ok, evaluation.failure
    assert evaluation.scores.shape == (4,) and np.all((evaluation.scores > 0) & (evaluation.scores < 1))
    assert "budget_used" in evaluation.extras
    box.close()
    assert descendants() == [] and not scratch.exists()
    assert memory_cgroup is None or not Path(memory_cgroup).exists()


TEXT_SCORER = """
def evaluate(path):
    text = open(path).read()
    return {"a": float(path.endswith("candidate.txt")), "b": float(len(text))}
"""


@pytest.mark.parametrize("isolation", ["process", "none"])
def test_programs_that_are_not_python_are_not_compiled(tmp_path, isolation):
    limits = spec.SandboxLimits(workers=1, isolation=isolation)
    with Sandbox(scorer(tmp_path, TEXT_SCORER), ("a", "b"), limits, suffix=".txt") as box:
        evaluation = box.evaluate("RIGHT, DOWN, (not python")
    assert evaluation.ok, evaluation.failure
    assert evaluation.scores.tolist() == [1.0, 24.0]
    with Sandbox(scorer(tmp_path, TEXT_SCORER), ("a", "b"), limits, suffix=".txt") as box:
        assert box.evaluate("lone \ud800 surrogate").failure.kind == "syntax"
        assert box.evaluate("fine").ok


def test_a_scorer_that_disappears_is_a_user_error_at_the_restart(tmp_path):
    box = sandbox(tmp_path)
    try:
        assert box.evaluate("x = 1").ok
        (tmp_path / "score.py").write_text("raise ImportError('gone')\n")
        os.killpg(box._workers[0].proc.pid, signal.SIGKILL)
        box._workers[0].proc.wait()
        with pytest.raises(UserError, match="gone"):
            box.evaluate("x = 2")
    finally:
        box.close()
    with pytest.raises(RuntimeError, match="closed"):
        box.evaluate("x = 3")


@pytest.mark.parametrize("mode", [pytest.param("on", marks=needs_root), "off"])
def test_workers_exit_when_the_search_process_is_killed(tmp_path, mode):
    script = (
        "import time\nfrom evo import spec\nfrom evo.sandbox import Sandbox\n"
        f"box = Sandbox({scorer(tmp_path)!r}, ('a', 'b'), spec.SandboxLimits(workers=2), namespaces={mode!r})\n"
        "assert box.evaluate('x = 1').ok\n"
        "print(*[w.proc.pid for w in box._workers], box._scratch, flush=True)\ntime.sleep(100)\n"
    )
    search = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = search.stdout.readline().split()
        scratch = Path(line.pop())
        zygotes = [psutil.Process(int(pid)) for pid in line]
        tree = zygotes + [c for z in zygotes for c in z.children(recursive=True)]
        assert len(zygotes) == 2 and len(tree) >= 3  # zygotes (and PID 1s), spare evaluations
    finally:
        search.kill()
        search.wait()
    gone, alive = psutil.wait_procs(tree, timeout=10)
    assert alive == []
    assert scratch.is_dir() is False  # the zygotes removed the sandbox's directory on their way out


def test_enormous_limits_are_clamped_not_crashes(tmp_path):
    with sandbox(tmp_path, timeout=1e12, memory_mb=10**12) as box:
        evaluation = box.evaluate("x = 1")
    assert evaluation.ok, evaluation.failure


@pytest.mark.parametrize("mode", [pytest.param("on", marks=needs_root), "off"])
def test_a_spare_that_died_while_idle_costs_one_evaluation(tmp_path, mode):
    with sandbox(tmp_path, mode) as box:
        assert box.evaluate("x = 1").ok
        time.sleep(0.3)  # the next spare is forked after the answer
        zygote = psutil.Process(box._workers[0].proc.pid)
        spares = [p for p in zygote.children(recursive=True) if p.uids().real != 0]
        assert len(spares) == 2  # the scorer's process and the candidate's
        for spare in spares:
            spare.kill()  # it stays a zombie until the zygote reaps it
        time.sleep(0.2)
        lost = box.evaluate("x = 2")
        assert lost.failure.kind in ("killed", "bad_output"), lost.failure
        assert box.evaluate("x = 3").ok


NON_ROOT = """
import json, os, time
from evo import spec
from evo.sandbox import Sandbox
with Sandbox(SCORER, ("a", "b"), spec.SandboxLimits(workers=1, timeout=5.0, max_processes=32)) as box:
    results = {
        "mode": box.mode,
        "uid": box.evaluate("import os\\ndef result():\\n    return [os.getuid(), 0]").scores[0],
        "storm": box.evaluate("import os, time\\nfor _ in range(300):\\n    if os.fork() == 0:\\n        time.sleep(1000)").failure.kind,
        "socket": box.evaluate("import socket\\nsocket.socket()").failure.kind,
        "after": box.evaluate("x = 1").ok,
    }
    from evo.sandbox import isolation
    zygote, ahead = box._workers[0].proc.pid, []
    for _ in range(5000):  # the spare pair for the next evaluation, forked once the last one answered
        ahead = isolation.children_of(zygote)
        if ahead:
            break
        time.sleep(0.001)
print(json.dumps({**results, "ahead": len(ahead), "ahead_running": [pid for pid in ahead if isolation.running(pid)]}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as another user")
def test_the_fallback_as_a_normal_user(tmp_path):
    """As a normal user: no namespaces, no user switch; RLIMIT_NPROC on top of the user's
    own processes, seccomp, subreaper clean-up. (The user may read any file, as the
    Python installation may live under /root.)"""
    from evo.sandbox import isolation

    uid = isolation.PRIVATE_ID_BASE + 0xFFFFF0  # above any zygote's private uid
    script = NON_ROOT.replace("SCORER", repr(scorer(tmp_path)))
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
        preexec_fn=lambda: isolation.drop_privileges(uid, uid), env={**os.environ, "TMPDIR": "/tmp"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report.pop("storm") in ("exception", "timeout")  # (RLIMIT_NPROC, or a machine too busy to fork 32 in 5 s)
    assert report.pop("ahead") >= 1 and report.pop("ahead_running") == []  # (killed with the zygote, not left to exit)
    assert report == {"mode": "rlimits", "uid": float(uid),
                      "socket": "exception" if platform.machine() in ("x86_64", "aarch64") else report["socket"],
                      "after": True}
    # Nothing of the uid runs once the sandbox is closed: not the storm's children (they sleep
    # 1,000 s), nor the zygote's spare pair, which is not in its process group. (What is left
    # is at most zombies that init has still to reap.)
    assert [pid for pid in isolation.processes_of(uid) if isolation.running(pid)] == []


FRESH = """
from evo.sandbox import candidate

def evaluate(path):
    program = candidate.load(path)
    out = []
    for _ in range(2):
        with program.fresh(5.0) as copy:
            out.append(copy.bump())  # each copy starts from the loaded state
    for seconds, call, kind, mark in ((0.5, "hang", "timeout", 10), (5.0, "leave", "killed", 20)):
        try:
            with program.fresh(seconds) as copy:
                getattr(copy, call)()
        except candidate.CandidateError as error:
            out.append(mark if error.kind == kind else -1)
    with program.fresh(5.0) as copy:
        out.append(copy.bump())  # a copy still comes after one timed out and one exited
    out.append(program.bump())  # the loaded module itself, which no copy changed
    return out
"""
FRESH_CANDIDATE = """
N = 0

def bump():
    global N
    N += 1
    return N

def hang():
    while True:
        pass

def leave():
    import os
    os._exit(0)
"""


@pytest.mark.parametrize("mode", [pytest.param("on", marks=needs_root), "off"])
def test_fresh_copies_of_the_candidate_are_isolated_and_timed(tmp_path, mode):
    limits = spec.SandboxLimits(workers=1, timeout=20.0, memory_mb=256)
    with Sandbox(scorer(tmp_path, FRESH), [f"r{i}" for i in range(6)], limits, namespaces=mode) as box:
        evaluation = box.evaluate(FRESH_CANDIDATE)
        broken = box.evaluate(FRESH_CANDIDATE.replace("    return N", "    import os\n    os.write(4, b'junk')\n    return N"))
    assert evaluation.ok, evaluation.failure
    assert evaluation.scores.tolist() == [1.0, 1.0, 10.0, 20.0, 1.0, 1.0]
    assert not broken.ok and broken.failure.kind == "bad_output"  # a copy that garbles its channel: no value counts
