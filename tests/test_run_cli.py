"""`evo run` / `evo run --resume` / `evo show` through the real console script."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

SPEC = """
[problem]
name = "toy"
program = "initial.py"
scorer = "score.py:evaluate"
objectives = ["fa", "fb"]

[sandbox]
isolation = "process"
workers = 2
timeout = 10.0

[features.length]
source = "code_length"
range = [0, 200]
bins = 4

[search]
islands = 2
migration_interval = 10
selection = "lexicase"
parents = 1
inspirations = 1
samples_per_prompt = 2
iterations = 40

[prompt]
style = "full"
"""
PROGRAM = "# EVOLVE-BLOCK-START\nA = 1.0\nB = 2.0\nC = A * B + 1.0\n# EVOLVE-BLOCK-END\n"
SCORER = """
import time

def evaluate(path):
    ns = {}
    exec(open(path).read(), ns)
    time.sleep(DELAY)
    a, b = float(ns["A"]), float(ns["B"])
    return {"fa": 1.0 / (1.0 + abs(a - 3.0)), "fb": 1.0 / (1.0 + abs(b + 1.0))}
"""


SCRIPT = shutil.which("evo", path=str(Path(sys.executable).parent)) or shutil.which("evo")


def evo(*args: str, timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The installed `evo` console script."""
    assert SCRIPT, "the evo console script is not installed (pip install -e .)"
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


@pytest.fixture
def problem(tmp_path: Path) -> Path:
    (tmp_path / "initial.py").write_text(PROGRAM)
    (tmp_path / "score.py").write_text("DELAY = 0.0\n" + SCORER)
    (tmp_path / "problem.toml").write_text(SPEC)
    return tmp_path / "problem.toml"


def show(directory: Path) -> dict:
    result = evo("show", str(directory), "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
def test_run_then_show(problem, tmp_path):
    out = tmp_path / "run"
    result = evo("run", str(problem), "--policy", "mutate:", "--iterations", "12", "--seed", "3", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "12 iterations" in result.stdout
    assert "best=" in result.stderr and "evals/s=" in result.stderr and "fail=" in result.stderr  # the progress bar
    data = show(out)
    assert data["iterations"] == 12
    assert data["programs"] + data["duplicates"] + data["unparseable"] == 12 * 2 + 1  # + the initial program
    assert set(data["best"]["scores"]) == {"fa", "fb"} and "A =" in data["best"]["code"]
    assert data["pareto"] and 0 < data["coverage"] <= 1
    assert (out / "best.py").read_text() == data["best"]["code"]
    text = evo("show", str(out), "--plots", "--lineage", str(tmp_path / "lineage.graphml"))
    assert text.returncode == 0, text.stderr
    assert (out / "archive.png").stat().st_size > 1000 and (out / "best_so_far.png").stat().st_size > 1000
    import networkx as nx

    graph = nx.read_graphml(tmp_path / "lineage.graphml")
    assert graph.number_of_nodes() >= data["programs"] and graph.number_of_edges() > 0


def test_the_progress_bar_shows_coverage_only_with_features(problem, tmp_path):
    with_features = evo("run", str(problem), "--policy", "mutate:", "--iterations", "2", "--out", str(tmp_path / "a"))
    assert with_features.returncode == 0, with_features.stderr
    assert "cov=" in with_features.stderr and "evals/s=" in with_features.stderr
    problem.write_text(SPEC.replace('[features.length]\nsource = "code_length"\nrange = [0, 200]\nbins = 4\n', ""))
    without = evo("run", str(problem), "--policy", "mutate:", "--iterations", "2", "--out", str(tmp_path / "b"))
    assert without.returncode == 0, without.stderr
    assert "[features" not in problem.read_text()
    assert "cov=" not in without.stderr and "evals/s=" in without.stderr


def test_spec_flags_override_the_spec(problem, tmp_path):
    out = tmp_path / "run"
    result = evo("run", str(problem), "--policy", "mutate:", "--iterations", "3", "--islands", "3",
                 "--set", "features.length.bins=5", "--style", "diff", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    settings = json.loads((out / "run.json").read_text())
    assert settings["overrides"] == {"search.iterations": 3, "search.islands": 3, "prompt.style": "diff",
                                     "features.length.bins": 5}
    config = json.loads(sqlite3.connect(out / "programs.sqlite").execute("SELECT value FROM meta WHERE key='config'").fetchone()[0])
    assert config["search"]["islands"] == 3 and config["features"][0]["bins"] == 5


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["run", "missing.toml", "--policy", "mutate:"], 2, "no such spec file"),
        (["run", "{spec}", "--policy", "nope:"], 2, "unknown policy"),
        (["run", "{spec}"], 2, "needs SPEC and --policy URI (or --resume DIR); without a model: --policy mutate:"),
        (["run", "--resume", "{tmp}/nothing"], 2, "not a run directory"),
        (["run", "{spec}", "--policy", "mutate:", "--islands", "0"], 2, "islands"),
        (["show", "{tmp}/nothing"], 2, "no run here"),
    ],
)
def test_user_errors_are_one_line(problem, tmp_path, args, code, message):
    args = [a.format(spec=problem, tmp=tmp_path) for a in args]
    result = evo(*args, cwd=tmp_path)
    assert result.returncode == code, (result.stdout, result.stderr)
    assert not (tmp_path / "runs").exists()  # nothing was created
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_failing_initial_program_is_exit_1(problem, tmp_path):
    (tmp_path / "initial.py").write_text("# EVOLVE-BLOCK-START\nA = 1 / 0\n# EVOLVE-BLOCK-END\n")
    result = evo("run", str(problem), "--policy", "mutate:", "--out", str(tmp_path / "run"))
    assert result.returncode == 1 and "initial program" in result.stderr and "ZeroDivisionError" in result.stderr


def test_existing_run_dir_is_not_overwritten(problem, tmp_path):
    out = tmp_path / "run"
    assert evo("run", str(problem), "--policy", "mutate:", "--iterations", "2", "--out", str(out), "--quiet").returncode == 0
    again = evo("run", str(problem), "--policy", "mutate:", "--out", str(out))
    assert again.returncode == 2 and "--resume" in again.stderr


def journal_rows(directory: Path) -> tuple[list, list]:
    db = sqlite3.connect(directory / "programs.sqlite")  # the journal shares the run's one file
    candidates = db.execute("SELECT iteration, slot, hash, status FROM candidates ORDER BY iteration, slot").fetchall()
    evaluations = db.execute("SELECT iteration, slot, scores, failure_kind FROM evaluations ORDER BY iteration, slot").fetchall()
    db.close()
    return candidates, evaluations


def programs(directory: Path) -> list:
    db = sqlite3.connect(directory / "programs.sqlite")
    rows = db.execute("SELECT id, code, island, iteration, scores, origin, removed FROM programs ORDER BY id").fetchall()
    db.close()
    return rows


def committed(directory: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{directory / 'programs.sqlite'}?mode=ro", uri=True, timeout=1)
        row = db.execute("SELECT value FROM meta WHERE key = 'iteration'").fetchone()
        db.close()
        return int(row[0]) if row else 0
    except sqlite3.Error:
        return 0


def kill_mid_run(problem: Path, budget: list[str], out: Path, after: int, total: int) -> None:
    """Start `evo run` and SIGKILL it (the run and its sandbox workers, mid-flight) once `after`
    of its `total` iterations are committed."""
    process = subprocess.Popen([SCRIPT, "run", str(problem), *budget, "--out", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while committed(out) < after and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert after <= committed(out) < total, "the run was not killed mid-way"


@pytest.mark.slow
@pytest.mark.parametrize("answers", [[], ["--answers", "3"]], ids=["one-program", "sets-of-3"])
def test_sigkill_then_resume_loses_nothing_and_continues(problem, tmp_path, answers):
    (tmp_path / "score.py").write_text("DELAY = 0.004\n" + SCORER)
    budget = ["--iterations", "60", "--seed", "5", "--policy", "mutate:", "--quiet", *answers]
    reference = tmp_path / "reference"
    assert evo("run", str(problem), *budget, "--out", str(reference)).returncode == 0

    out = tmp_path / "killed"
    kill_mid_run(problem, budget, out, after=20, total=60)
    before_programs = programs(out)
    before_candidates, before_evaluations = journal_rows(out)
    killed_at = committed(out)

    resumed = evo("run", "--resume", str(out))
    assert resumed.returncode == 0, resumed.stderr
    after_programs = programs(out)
    after_candidates, after_evaluations = journal_rows(out)
    assert after_programs[: len(before_programs)] == before_programs  # nothing stored was lost or changed
    assert set(before_evaluations) <= set(after_evaluations)  # nothing evaluated was lost
    assert {row[:3] for row in before_candidates} <= {row[:3] for row in after_candidates}  # (statuses move on)
    data = show(out)
    assert data["iterations"] == 60 > killed_at  # the count continued
    # and the resumed run is the run that was never killed
    assert programs(out) == programs(reference)
    assert journal_rows(out) == journal_rows(reference)
    assert show(out)["best"] == show(reference)["best"]


def test_resume_a_finished_run_with_a_larger_budget(problem, tmp_path):
    out = tmp_path / "run"
    assert evo("run", str(problem), "--policy", "mutate:", "--iterations", "4", "--out", str(out), "--quiet").returncode == 0
    again = evo("run", "--resume", str(out), "--iterations", "7", "--quiet")
    assert again.returncode == 0, again.stderr
    assert "7 iterations" in again.stdout and show(out)["iterations"] == 7
    conflicting = evo("run", str(problem), "--resume", str(out))
    assert conflicting.returncode == 2 and "--resume" in conflicting.stderr


def test_text_programs_are_evaluated_as_text(tmp_path):
    from evo import spec as specs
    from evo.search import make_evaluator

    (tmp_path / "route.txt").write_text("maze\n# EVOLVE-BLOCK-START\nRRDD\n# EVOLVE-BLOCK-END\n")
    (tmp_path / "score.py").write_text(
        "def evaluate(path):\n    text = open(path).read()\n"
        "    assert path.endswith('.txt') and 'x' in text\n    return {'r': text.count('x') / 4, 'len': len(text)}\n")
    (tmp_path / "problem.toml").write_text(
        '[problem]\nprogram = "route.txt"\nscorer = "score.py:evaluate"\nobjectives = ["r"]\n'
        '[sandbox]\nisolation = "none"\n[features.len]\nsource = "scorer:len"\nrange = [0, 100]\n')
    spec = specs.load(tmp_path / "problem.toml")
    evaluator = make_evaluator(spec, "process")
    try:
        good = evaluator.evaluate("maze\n# EVOLVE-BLOCK-START\nxxxx  yy\n# EVOLVE-BLOCK-END\n")
        assert good.ok and good.scores.tolist() == [1.0] and good.extras["len"] > 10
        bad = evaluator.evaluate("no route\n")
        assert bad.failure.kind == "exception" and "AssertionError" in bad.failure.message
    finally:
        evaluator.close()


@pytest.mark.slow
def test_continue_prompts_with_a_real_tiny_model(tmp_path):
    """A random-weight nano model through `local:`: continue prompts on a text program."""
    import torch

    from training import tiny

    torch.manual_seed(0)
    tokenizer = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tokenizer), tokenizer, tmp_path / "model")
    (tmp_path / "route.txt").write_text("walk:\n# EVOLVE-BLOCK-START\nRRDD\n# EVOLVE-BLOCK-END\n")
    (tmp_path / "score.py").write_text(
        "def evaluate(path):\n    block = open(path).read().split('START\\n')[1].split('# EVOLVE')[0]\n"
        "    return {'r': min(block.count('R'), 8) / 8, 'd': min(block.count('D'), 8) / 8}\n")
    (tmp_path / "problem.toml").write_text(
        '[problem]\nprogram = "route.txt"\nscorer = "score.py:evaluate"\nobjectives = ["r", "d"]\n'
        '[sandbox]\nisolation = "none"\n[search]\nislands = 1\nsamples_per_prompt = 2\n[prompt]\nstyle = "continue"\n')
    out = tmp_path / "run"
    result = evo("run", str(tmp_path / "problem.toml"), "--policy", f"local:{tmp_path / 'model'}",
                 "--iterations", "3", "--max-new-tokens", "12", "--seed", "1", "--out", str(out), "--quiet",
                 timeout=300)
    assert result.returncode == 0, result.stderr
    rows = programs(out)
    assert len(rows) >= 3  # the initial program and distinct continuations
    for row in rows:  # the file around the block is kept; the block is prefix + completion
        assert row[1].startswith("walk:\n# EVOLVE-BLOCK-START\n") and row[1].endswith("# EVOLVE-BLOCK-END\n")


def test_one_run_per_directory_at_a_time(problem, tmp_path):
    (tmp_path / "score.py").write_text("DELAY = 0.05\n" + SCORER)
    out = tmp_path / "run"
    first = subprocess.Popen([SCRIPT, "run", str(problem), "--policy", "mutate:", "--iterations", "200",
                              "--out", str(out), "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while committed(out) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        settings = (out / "run.json").read_bytes()
        second = evo("run", "--resume", str(out), "--iterations", "999")
        assert second.returncode == 2 and "in use by another evo run" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
        assert (out / "run.json").read_bytes() == settings  # the refused resume left the live run's budget
    finally:
        first.kill()
        first.wait()
    assert evo("run", "--resume", str(out), "--iterations", "3", "--quiet").returncode == 0  # the lock died with it


LEGACY_JOURNAL = """
CREATE TABLE j.meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE j.candidates (
    iteration INTEGER NOT NULL, slot INTEGER NOT NULL, island INTEGER NOT NULL,
    code TEXT NOT NULL, hash TEXT NOT NULL, parents TEXT NOT NULL,
    status TEXT NOT NULL, message TEXT NOT NULL,
    PRIMARY KEY (iteration, slot));
CREATE TABLE j.evaluations (
    iteration INTEGER NOT NULL, slot INTEGER NOT NULL,
    scores TEXT, failure_kind TEXT, failure_message TEXT,
    extras TEXT NOT NULL, seconds REAL NOT NULL, output TEXT NOT NULL,
    PRIMARY KEY (iteration, slot));
CREATE TABLE j.commits (iteration INTEGER PRIMARY KEY);
INSERT INTO j.candidates SELECT iteration, slot, island, code, hash, parents, status, message FROM main.candidates;
UPDATE j.candidates SET status = 'pending' WHERE status = 'inserted';
INSERT INTO j.evaluations SELECT iteration, slot, scores, failure_kind, failure_message, extras, seconds, output
    FROM main.evaluations;
DROP TABLE main.candidates;
DROP TABLE main.evaluations;
"""


def to_legacy_layout(directory: Path) -> None:
    """Rewrite a run directory as the layout before one file per run: the journal in
    journal.sqlite, the database config with its [search] keys at the top level."""
    db = sqlite3.connect(directory / "programs.sqlite", isolation_level=None)
    db.execute("ATTACH DATABASE ? AS j", (str(directory / "journal.sqlite"),))
    db.executescript(LEGACY_JOURNAL)
    iteration = int(db.execute("SELECT value FROM meta WHERE key = 'iteration'").fetchone()[0])
    db.executemany("INSERT INTO j.commits VALUES (?)", [(i,) for i in range(iteration)])
    config = json.loads(db.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()[0])
    search = config.pop("search")
    for key in ("samples_per_prompt", "iterations", "target"):
        search.pop(key)
    db.execute("UPDATE meta SET value = ? WHERE key = 'config'", (json.dumps({**config, **search}),))
    db.close()


def test_a_run_directory_of_the_two_file_layout_resumes_into_one_file(problem, tmp_path):
    runs = {}
    for name in ("reference", "legacy"):
        out = tmp_path / name
        first = evo("run", str(problem), "--policy", "mutate:", "--iterations", "4", "--seed", "2", "--out", str(out), "--quiet")
        assert first.returncode == 0, first.stderr
        if name == "legacy":
            counted = show(out)
            to_legacy_layout(out)
            assert "candidates" not in str(programs(out)) and (out / "journal.sqlite").is_file()
            assert show(out) == counted  # evo show reads the old journal as it is
        again = evo("run", "--resume", str(out), "--iterations", "7", "--quiet")
        assert again.returncode == 0, again.stderr
        runs[name] = (programs(out), journal_rows(out), show(out)["duplicates"], show(out)["iterations"])
    assert not (tmp_path / "legacy" / "journal.sqlite").exists()
    assert runs["legacy"] == runs["reference"] and runs["legacy"][3] == 7
