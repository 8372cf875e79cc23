"""The evolution loop: determinism under any timing, overlap, dedupe, parse failures, resume."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pytest

from evo.journal import DUPLICATE, PARSE_ERROR, Journal
from evo.loop import Loop, LoopConfig
from evo.policies.base import Completion
from evo.policies.mutate import MutatePolicy
from evo.program import code_hash
from evo.prompts import Shown
from evo.sandbox.pool import Sandbox
from evo.spec import Sandbox as Limits

PROGRAM = "# EVOLVE-BLOCK-START\nA = 1.0\nB = 2.0\n# EVOLVE-BLOCK-END\n"
SCORER = '''
def evaluate(path):
    ns = {}
    exec(open(path).read(), ns)
    a, b = float(ns["A"]), float(ns["B"])
    return {"fa": 1.0 / (1.0 + abs(a - 3.0)), "fb": 1.0 / (1.0 + abs(b + 1.0))}
'''


class ListArchive:
    """A minimal in-memory archive: islands of (code, scores), uniform parent choice."""

    def __init__(self, islands: int = 2) -> None:
        self.islands = islands
        self.members: list[list[tuple[str, np.ndarray]]] = [[] for _ in range(islands)]
        self.hashes: set[str] = set()
        self.ended: list[int] = []

    def seed(self, code: str, scores: np.ndarray) -> None:
        for island in self.members:
            island.append((code, scores))

    def sample(self, island, rng):
        pool = self.members[island]
        picks = rng.integers(0, len(pool), size=3)
        shown = [Shown(pool[i][0], float(pool[i][1].mean()), {"fa": pool[i][1][0], "fb": pool[i][1][1]}, int(i)) for i in picks]
        return shown[:1], shown[1:]

    @property
    def iterations(self):
        return len(self.ended)

    def key(self, code):
        return code_hash(code)

    def keys(self):
        return set(self.hashes)

    def commit(self, batch):
        for iteration, evaluated in batch:
            assert iteration == len(self.ended)
            for candidate, evaluation in evaluated:
                self.hashes.add(candidate.hash)
                if evaluation.ok:
                    self.members[candidate.island].append((candidate.code, evaluation.scores))
            self.ended.append(iteration)

    def best_scalar(self):
        return max((s.mean() for island in self.members for _, s in island), default=None)

    def coverage(self):
        return 0.0


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
    with Sandbox(f"{tmp_path / 'score.py'}:evaluate", ["fa", "fb"], Limits(isolation="none")) as box:
        yield box


def start(tmp_path, name, sandbox, policy, config, jitter=0.0, seed=0, islands=2):
    archive = ListArchive(islands)
    archive.seed(PROGRAM, sandbox.evaluate(PROGRAM).scores)
    journal = Journal(tmp_path / f"{name}.sqlite")
    evaluator = JitteryEvaluator(sandbox, jitter, seed)
    return Loop(config, policy, evaluator, archive, journal), archive, journal, evaluator


def snapshot(journal):
    rows = [(c.iteration, c.slot, c.hash, c.status) for c in journal.candidates()]
    evals = {k: (None if e.scores is None else tuple(e.scores)) for k, e in journal.evaluations().items()}
    return rows, evals


CONFIG = LoopConfig(iterations=24, seed=7, samples=3, batch=2, depth=2, objectives=("fa", "fb"))


def test_same_seed_same_run_whatever_the_timing(tmp_path, sandbox):
    runs = []
    for name, jitter, seed in (("a", 0.0, 1), ("b", 0.01, 2), ("c", 0.01, 3)):
        loop, archive, journal, _ = start(tmp_path, name, sandbox, MutatePolicy(), CONFIG, jitter, seed)
        progress = loop.run()
        assert progress.iteration == 24 and journal.committed() == 24
        runs.append((snapshot(journal), [m[0] for island in archive.members for m in island]))
    assert runs[0] == runs[1] == runs[2]
    other, *_ = start(tmp_path, "d", sandbox, MutatePolicy(), LoopConfig(**{**CONFIG.__dict__, "seed": 8}))
    other.run()
    assert snapshot(other.journal) != runs[0][0]


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
    loop, _, journal, evaluator = start(tmp_path, "o", sandbox, SlowPolicy(0.05, log), config, jitter=0.05)
    evaluator.log = log
    loop.run()
    log.sort(key=lambda item: item[1])
    generating = evaluating = 0
    overlapped = False
    for event, _ in log:
        generating += {"gen-start": 1, "gen-end": -1}.get(event, 0)
        evaluating += {"eval-start": 1, "eval-end": -1}.get(event, 0)
        overlapped |= generating > 0 and evaluating > 0
    assert overlapped
    assert journal.committed() == 12


class FixedPolicy:
    def __init__(self, replies):
        self.replies = replies

    def generate(self, prompts, *, n=1, **options):
        return [[Completion(self.replies[i % len(self.replies)]) for i in range(n)] for _ in prompts]


def test_duplicates_and_parse_failures_are_counted_not_evaluated(tmp_path, sandbox):
    same = "```python\n# EVOLVE-BLOCK-START\nA = 3.0\nB = 2.0\n# EVOLVE-BLOCK-END\n```"
    policy = FixedPolicy([same, "no code", same.replace("3.0", "3.0   ")])
    config = LoopConfig(iterations=4, seed=0, samples=3, batch=1, depth=1)
    loop, archive, journal, evaluator = start(tmp_path, "d", sandbox, policy, config)
    progress = loop.run()
    assert evaluator.calls == 1  # one distinct program, whitespace variants are duplicates
    statuses = [c.status for c in journal.candidates()]
    assert statuses.count(PARSE_ERROR) == 4 and statuses.count(DUPLICATE) == 7
    assert (progress.parse_errors, progress.duplicates, progress.evaluations) == (4, 7, 1)
    assert archive.ended == [0, 1, 2, 3]


def test_initial_program_is_a_duplicate(tmp_path, sandbox):
    loop, archive, journal, evaluator = start(tmp_path, "i", sandbox, FixedPolicy([f"```python\n{PROGRAM}```"]),
                                              LoopConfig(iterations=2, samples=1, batch=1, depth=1))
    archive.hashes.add(code_hash(PROGRAM))
    loop = Loop(loop.config, loop.policy, evaluator, archive, journal)  # the seen set is read at start
    loop.run()
    assert evaluator.calls == 0


def test_stops_at_target(tmp_path, sandbox):
    best = "```python\n# EVOLVE-BLOCK-START\nA = 3.0\nB = -1.0\n# EVOLVE-BLOCK-END\n```"
    policy = FixedPolicy([best])
    config = LoopConfig(iterations=50, seed=0, samples=1, batch=1, depth=1, target=1.0)
    loop, _, journal, _ = start(tmp_path, "t", sandbox, policy, config)
    progress = loop.run()
    assert progress.reached_target and progress.best == 1.0
    assert progress.iteration == 1 and journal.committed() == 1


class Crash(Exception):
    pass


def test_resume_after_a_crash_continues_the_same_run(tmp_path, sandbox):
    reference, _, ref_journal, _ = start(tmp_path, "ref", sandbox, MutatePolicy(), CONFIG, jitter=0.005)
    reference.run()

    loop, archive, journal, evaluator = start(tmp_path, "crash", sandbox, MutatePolicy(), CONFIG, jitter=0.005)

    def crash(progress):
        if progress.iteration >= 9:
            raise Crash

    loop.on_progress = crash
    with pytest.raises(Crash):
        loop.run()
    killed_at = journal.committed()
    assert 9 <= killed_at < 24
    generated_before = len(journal.candidates())
    assert generated_before > killed_at * CONFIG.samples  # work beyond the commit point was journaled
    resumed = Loop(CONFIG, MutatePolicy(), evaluator, archive, Journal(journal.path))
    assert resumed.committed == killed_at
    progress = resumed.run()
    assert progress.iteration == 24
    assert snapshot(resumed.journal) == snapshot(ref_journal)


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
    loop, archive, journal, _ = start(tmp_path, "x", sandbox, CountingPolicy(), config)
    progress = loop.run()
    assert progress.reached_target and progress.iteration == 3 and journal.committed() == 3
    assert archive.ended == [0, 1, 2]


def test_resume_when_the_database_committed_but_the_journal_did_not(tmp_path, sandbox):
    loop, archive, journal, evaluator = start(tmp_path, "j", sandbox, MutatePolicy(), CONFIG)
    original = journal.mark_committed

    journal.mark_committed = lambda iterations: (_ for _ in ()).throw(Crash())  # the kill lands here
    with pytest.raises(Crash):
        loop.run()
    journal.mark_committed = original
    assert journal.committed() == 0 and archive.iterations > 0
    resumed = Loop(CONFIG, MutatePolicy(), evaluator, archive, Journal(journal.path))
    assert resumed.committed == archive.iterations == resumed.journal.committed()
    assert resumed.run().iteration == 24


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
    loop, *_ = start(tmp_path, "b", sandbox, policy, config)
    loop.run()
    assert policy.budgets == [expected, expected]
