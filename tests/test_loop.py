"""The evolution loop: determinism under any timing, overlap, dedupe, parse failures, resume."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from evo.database import Database, DatabaseConfig, SearchSettings
from evo.database.journal import DUPLICATE, INSERTED, PARSE_ERROR, PENDING
from evo.loop import Evolution, LoopConfig, run
from evo.policies.base import Completion
from evo.policies.mutate import MutatePolicy
from evo.sandbox.pool import Sandbox
from evo.spec import SandboxLimits

PROGRAM = "# EVOLVE-BLOCK-START\nA = 1.0\nB = 2.0\n# EVOLVE-BLOCK-END\n"
SCORER = '''
def evaluate(path):
    ns = {}
    exec(open(path).read(), ns)
    a, b = float(ns["A"]), float(ns["B"])
    return {"fa": 1.0 / (1.0 + abs(a - 3.0)), "fb": 1.0 / (1.0 + abs(b + 1.0))}
'''
DATABASE = DatabaseConfig(objectives=("fa", "fb"), search=SearchSettings(islands=2, selection="uniform", parents=1,
                                                                        inspirations=2, migration_interval=5))


class JitteryEvaluator:
    """A real sandbox behind a pool that finishes evaluations in a random order."""

    def __init__(self, sandbox: Sandbox, jitter: float, seed: int) -> None:
        self.sandbox, self.jitter = sandbox, jitter
        self.random = random.Random(seed)
        self.pool = ThreadPoolExecutor(4)
        self.calls = 0
        self.active = 0
        self.lock = threading.Lock()
        self.log: list[tuple[str, float]] = []

    def submit(self, code: str) -> Future:
        self.calls += 1
        delay = self.random.random() * self.jitter
        return self.pool.submit(self._run, code, delay)

    def _run(self, code, delay):
        self.log.append(("eval-start", time.monotonic()))
        time.sleep(delay)
        result = self.sandbox.evaluate(code)
        self.log.append(("eval-end", time.monotonic()))
        return result


@pytest.fixture
def sandbox(tmp_path):
    (tmp_path / "score.py").write_text(SCORER)
    with Sandbox(f"{tmp_path / 'score.py'}:evaluate", ["fa", "fb"], SandboxLimits(isolation="none")) as box:
        yield box


def start(tmp_path, name, sandbox, config, jitter=0.0, seed=0):
    """A fresh run database holding the initial program, its Evolution and a jittery evaluator."""
    db = Database.open(tmp_path / name, DATABASE)
    db.add_initial(PROGRAM, sandbox.evaluate(PROGRAM))
    return Evolution(config, db), db, JitteryEvaluator(sandbox, jitter, seed)


def snapshot(db):
    rows = [(c.iteration, c.slot, c.hash, c.status) for c in db.journal.candidates()]
    evals = {k: (None if e.scores is None else tuple(e.scores)) for k, e in db.journal.evaluations().items()}
    return rows, evals


def codes(db):
    return [(p.code, p.island, p.removed) for p in db.programs.values()]


CONFIG = LoopConfig(iterations=24, seed=7, samples=3, batch=2, depth=2)


def test_same_seed_same_run_whatever_the_timing(tmp_path, sandbox):
    runs = []
    for name, jitter, seed in (("a", 0.0, 1), ("b", 0.01, 2), ("c", 0.01, 3)):
        evolution, db, evaluator = start(tmp_path, name, sandbox, CONFIG, jitter, seed)
        progress = run(evolution, MutatePolicy(), evaluator)
        assert progress.iteration == 24 and db.iteration == 24
        runs.append((snapshot(db), codes(db)))
    assert runs[0] == runs[1] == runs[2]
    other, db, evaluator = start(tmp_path, "d", sandbox, LoopConfig(**{**CONFIG.__dict__, "seed": 8}))
    run(other, MutatePolicy(), evaluator)
    assert snapshot(db) != runs[0][0]


class SlowPolicy:
    """Mutate, but each call takes a while and logs when it ran."""

    def __init__(self, seconds: float, log: list) -> None:
        self.inner, self.seconds, self.log = MutatePolicy(), seconds, log

    def generate(self, prompts, **options):
        self.log.append(("gen-start", time.monotonic()))
        time.sleep(self.seconds)
        out = self.inner.generate(prompts, **options)
        self.log.append(("gen-end", time.monotonic()))
        return out


def test_generation_and_evaluation_overlap(tmp_path, sandbox):
    log: list = []
    config = LoopConfig(iterations=12, seed=1, samples=2, batch=2, depth=2)
    evolution, db, evaluator = start(tmp_path, "o", sandbox, config, jitter=0.05)
    evaluator.log = log
    run(evolution, SlowPolicy(0.05, log), evaluator)
    log.sort(key=lambda item: item[1])
    generating = evaluating = 0
    overlapped = False
    for event, _ in log:
        generating += {"gen-start": 1, "gen-end": -1}.get(event, 0)
        evaluating += {"eval-start": 1, "eval-end": -1}.get(event, 0)
        overlapped |= generating > 0 and evaluating > 0
    assert overlapped
    assert db.iteration == 12


class FixedPolicy:
    def __init__(self, replies):
        self.replies = replies

    def generate(self, prompts, *, n=1, **options):
        return [[Completion(self.replies[i % len(self.replies)]) for i in range(n)] for _ in prompts]


def test_duplicates_and_parse_failures_are_counted_not_evaluated(tmp_path, sandbox):
    same = "```python\n# EVOLVE-BLOCK-START\nA = 3.0\nB = 2.0\n# EVOLVE-BLOCK-END\n```"
    policy = FixedPolicy([same, "no code", same.replace("3.0", "3.0   ")])
    config = LoopConfig(iterations=4, seed=0, samples=3, batch=1, depth=1)
    evolution, db, evaluator = start(tmp_path, "d", sandbox, config)
    progress = run(evolution, policy, evaluator)
    assert evaluator.calls == 1  # one distinct program, whitespace variants are duplicates
    statuses = [c.status for c in db.journal.candidates()]
    assert statuses.count(PARSE_ERROR) == 4 and statuses.count(DUPLICATE) == 7
    assert (progress.parse_errors, progress.duplicates, progress.evaluations) == (4, 7, 1)
    assert db.iteration == 4 and len(db.evaluated(ok_only=False)) == 2  # the initial program and one more


def test_initial_program_is_a_duplicate(tmp_path, sandbox):
    evolution, db, evaluator = start(tmp_path, "i", sandbox, LoopConfig(iterations=2, samples=1, batch=1, depth=1))
    assert db.dedupe_key(PROGRAM) in db.seen  # the seen set is read at start
    run(evolution, FixedPolicy([f"```python\n{PROGRAM}```"]), evaluator)
    assert evaluator.calls == 0


def test_stops_at_target(tmp_path, sandbox):
    best = "```python\n# EVOLVE-BLOCK-START\nA = 3.0\nB = -1.0\n# EVOLVE-BLOCK-END\n```"
    policy = FixedPolicy([best])
    config = LoopConfig(iterations=50, seed=0, samples=1, batch=1, depth=1, target=1.0)
    evolution, db, evaluator = start(tmp_path, "t", sandbox, config)
    progress = run(evolution, policy, evaluator)
    assert progress.reached_target and progress.best == 1.0
    assert progress.iteration == 1 and db.iteration == 1


class Crash(Exception):
    pass


def test_resume_after_a_crash_continues_the_same_run(tmp_path, sandbox):
    reference, ref_db, evaluator = start(tmp_path, "ref", sandbox, CONFIG, jitter=0.005)
    run(reference, MutatePolicy(), evaluator)

    evolution, db, evaluator = start(tmp_path, "crash", sandbox, CONFIG, jitter=0.005)

    def crash(progress):
        if progress.iteration >= 9:
            raise Crash

    with pytest.raises(Crash):
        run(evolution, MutatePolicy(), evaluator, crash)
    killed_at = db.iteration
    assert 9 <= killed_at < 24
    generated_before = len(db.journal.candidates())
    assert generated_before > killed_at * CONFIG.samples  # work beyond the commit point was journaled
    resumed = Evolution(CONFIG, Database.open(tmp_path / "crash"))
    assert resumed.committed == killed_at
    progress = run(resumed, MutatePolicy(), evaluator)
    assert progress.iteration == 24
    assert snapshot(resumed.db) == snapshot(ref_db) and codes(resumed.db) == codes(ref_db)


class CountingPolicy:
    """Prompt j (in call order) gets `A = j`, so iteration 2 is the first to reach the target."""

    def __init__(self):
        self.calls = 0

    def generate(self, prompts, *, n=1, **options):
        out = []
        for _ in prompts:
            code = f"# EVOLVE-BLOCK-START\nA = {float(self.calls + 1)}\nB = -1.0\n# EVOLVE-BLOCK-END\n"
            out.append([Completion(f"```python\n{code}```")] * n)
            self.calls += 1
        return out


def test_target_stops_at_the_exact_iteration_inside_a_batch(tmp_path, sandbox):
    config = LoopConfig(iterations=40, seed=0, samples=1, batch=4, depth=2, target=1.0)
    evolution, db, evaluator = start(tmp_path, "x", sandbox, config)
    progress = run(evolution, CountingPolicy(), evaluator)
    assert progress.reached_target and progress.iteration == 3 and db.iteration == 3
    assert sorted({p.iteration for p in db.evaluated()}) == [0, 1, 2]


def test_a_kill_inside_the_commit_transaction_leaves_neither_programs_nor_the_count(tmp_path, sandbox):
    """Programs, the iteration counter and the journal share one file and one transaction:
    a failure between inserting the programs and counting them rolls both back."""
    reference, ref_db, evaluator = start(tmp_path, "ref", sandbox, CONFIG)
    run(reference, MutatePolicy(), evaluator)
    evolution, db, evaluator = start(tmp_path, "j", sandbox, CONFIG)
    original = db.end_iteration
    db.end_iteration = lambda: (_ for _ in ()).throw(Crash()) if db.iteration >= 5 else original()  # the kill lands here
    with pytest.raises(Crash):
        run(evolution, MutatePolicy(), evaluator)
    reopened = Database.open(tmp_path / "j")
    killed_at = reopened.iteration  # the batch holding iteration 5 was rolled back whole
    assert killed_at == db.iteration <= 5 and reopened.state() == db.state()
    assert max(p.iteration for p in reopened.evaluated(ok_only=False)) < killed_at  # nothing uncounted stayed
    assert len(reopened.journal.candidates()) > killed_at * CONFIG.samples  # the journal kept the rest
    statuses = {(c.iteration < killed_at, c.status) for c in reopened.journal.candidates()}
    assert (True, INSERTED) in statuses and (False, PENDING) in statuses  # candidate statuses: same transaction
    assert (True, PENDING) not in statuses and (False, INSERTED) not in statuses
    resumed = Evolution(CONFIG, reopened)
    assert resumed.committed == killed_at
    assert run(resumed, MutatePolicy(), evaluator).iteration == 24
    assert snapshot(reopened) == snapshot(ref_db) and codes(reopened) == codes(ref_db)
    assert PENDING not in {c.status for c in reopened.journal.candidates()}  # every candidate is settled


class RecordingPolicy(FixedPolicy):
    def __init__(self, replies):
        super().__init__(replies)
        self.budgets = []

    def generate(self, prompts, *, n=1, max_new_tokens=None, **options):
        self.budgets.append(max_new_tokens)
        return super().generate(prompts, n=n)


@pytest.mark.parametrize("style, given, expected", [
    ("full", None, 4096), ("continue", None, 64 + 2 * len("A = 1.0\nB = 2.0\n")), ("continue", 7, 7)])
def test_completion_budget(tmp_path, sandbox, style, given, expected):
    policy = RecordingPolicy(["no code"])
    config = LoopConfig(iterations=2, samples=1, batch=1, depth=1, style=style, max_new_tokens=given)
    evolution, _, evaluator = start(tmp_path, "b", sandbox, config)
    run(evolution, policy, evaluator)
    assert policy.budgets == [expected, expected]


def test_the_ask_tell_example_in_docs_loop_md_runs(capsys, monkeypatch):
    """The notebook example of docs/loop.md, run as written (from the repository root)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "loop.md").read_text()
    example = text.split("### From Python: ask / tell", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(root)
    exec(compile(example, "docs/loop.md", "exec"), {})
    iteration, best = capsys.readouterr().out.split()
    assert int(iteration) == 6 and float(best) > 0


def test_prompts_show_a_minimized_objective_in_the_scorers_own_sign(tmp_path):
    (tmp_path / "score.py").write_text(SCORER)
    limits = SandboxLimits(isolation="none")
    with Sandbox(f"{tmp_path / 'score.py'}:evaluate", ["fa", "fb"], limits, minimize=("fb",)) as box:
        evaluation = box.evaluate(PROGRAM)
    assert evaluation.scores[1] == -0.25  # stored negated: fb = 1 / (1 + |2 + 1|)
    db = Database.open(tmp_path / "run", DatabaseConfig(objectives=("fa", "fb"), minimize=("fb",),
                                                        search=SearchSettings(islands=1, parents=1, inspirations=0)))
    db.add_initial(PROGRAM, evaluation)
    text = Evolution(LoopConfig(iterations=1, batch=1), db).ask().prompts[0].text
    assert "(fa=0.3333, fb=0.25 [lower is better])" in text and "-0.25" not in text
    assert "fb (lower is better)" in text
