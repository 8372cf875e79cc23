"""Symreg problem specs: the EVOLVE block is one expression after the task's own prompt, so a
trained expression model searches it (`continue`, a set head for m answers), `mutate:` edits
it, and a user's CSV becomes such a spec with one command."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import tasks
from evo import prompts
from evo.program import splice, split
from evo.prompt_sets import programs, widen
from evo.prompts import Shown
from tasks.symreg.data import REGIONS

REGION_NAMES = [f"region{r}" for r in range(REGIONS)]


@pytest.fixture(scope="module")
def task():
    return tasks.get("symreg")


def evo(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "evo", *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def scorer(directory: Path):
    spec = importlib.util.spec_from_file_location(f"score_{directory.name}", directory / "score.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.evaluate


def with_block(directory: Path, block: str) -> Path:
    path = directory / f"candidate{abs(hash(block))}.txt"
    path.write_text(splice((directory / "expression.txt").read_text(), block + "\n"))
    return path


def test_a_continue_prompt_is_the_tasks_own_prompt_and_a_set_prompt_its_m_answer_prompt(task, tmp_path):
    instance = task.instances("test", 3, seed=2)[2]
    spec = task.problem_spec(instance, tmp_path)
    code = (tmp_path / "expression.txt").read_text()
    one = prompts.build("continue", [Shown(code, 0.5)], rng=np.random.default_rng(0))
    assert one.text == task.prompt(instance, 1) + one.prefix
    set_head = (tmp_path / "expression.set.txt").read_text()
    three = widen(one, 3, set_head=set_head, separator=" | ")
    assert three.text == task.prompt(instance, 3) + one.prefix
    empty = widen(replace(one, text=task.prompt(instance, 1), prefix=""), 3, set_head=set_head, separator=" | ")
    blocks = [split(program).block for program in programs(empty, "x0 | sin(x0) | 2")]
    assert blocks == ["x0\n", "sin(x0)\n", "2\n"]  # each expression of a set reply is its own program
    assert 'style = "continue"' in spec.read_text() and 'separator = " | "' in spec.read_text()


def test_the_scorer_gives_region_scores_exact_and_valid(task, tmp_path):
    instance = task.instances("benchmark", 7)[6]  # nguyen-7
    task.problem_spec(instance, tmp_path)
    evaluate = scorer(tmp_path)
    initial = evaluate(tmp_path / "expression.txt")
    assert initial["valid"] == 1.0 and initial["exact"] == 0.0 and 0 < initial["region0"] < 1
    truth = evaluate(with_block(tmp_path, "log(x0 + 1) + log(x0**2 + 1)"))
    assert truth["exact"] == 1.0 and [truth[name] for name in REGION_NAMES] == [1.0] * REGIONS
    expected = task.score(instance, ["x0 * 0.9"])[0]
    assert [evaluate(with_block(tmp_path, "x0 * 0.9"))[name] for name in REGION_NAMES] == expected.tolist()
    for bad in ["x0 | x0", "import os", "x1", ""]:
        result = evaluate(with_block(tmp_path, bad))
        assert result["valid"] == 0.0 and not any(result[name] for name in REGION_NAMES), bad


def test_mutate_makes_progress_on_a_held_out_instance(task, tmp_path):
    instance = task.instances("test", 3, seed=1)[2]
    spec = task.problem_spec(instance, tmp_path / "spec")
    evo("run", str(spec), "--policy", "mutate:", "--iterations", "40", "--seed", "0", "--out", str(tmp_path / "run"),
        "--quiet")
    shown = json.loads(evo("show", str(tmp_path / "run"), "--json").stdout)
    initial = scorer(tmp_path / "spec")(tmp_path / "spec" / "expression.txt")
    assert shown["best"]["scalar"] > np.mean([initial[name] for name in REGION_NAMES]) + 0.1
    assert shown["best"]["code"].startswith(task.prompt(instance, 1))  # the head is kept; the block evolves


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """A symreg model trained for a few steps (it writes mostly nonsense, in the task's format)."""
    out = tmp_path_factory.mktemp("symreg-tiny") / "c"
    evo("pretrain", "--task", "symreg", "--out", str(out), "--steps", "3", "--batch-size", "4", "--pool", "4",
        "--eval-instances", "1", "--samples", "1", "--max-new-tokens", "40")
    return out


def test_a_local_checkpoint_searches_the_spec_with_one_and_three_answers(task, tmp_path, tiny_checkpoint):
    instance = task.instances("test", 1, seed=3)[0]
    spec = task.problem_spec(instance, tmp_path / "spec")
    for answers in ("1", "3"):
        out = tmp_path / f"run{answers}"
        evo("run", str(spec), "--policy", f"local:{tiny_checkpoint}", "--iterations", "2", "--answers", answers,
            "--threads", "1", "--seed", "0", "--out", str(out), "--quiet", "--max-new-tokens", "24")
        shown = json.loads(evo("show", str(out), "--json").stdout)
        assert shown["programs"] >= 1 and shown["best"]["code"].startswith(task.prompt(instance, 1))


def test_a_csv_becomes_a_spec_with_one_command(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.uniform(0.5, 2.0, size=(200, 2))
    y = X[:, 0] ** 2 + np.sin(X[:, 1])
    lines = ["y,x1,x0", *(f"{b:.17g},{a1:.17g},{a0:.17g}" for b, (a0, a1) in zip(y, X))]
    (tmp_path / "data.csv").write_text("\n".join(lines) + "\n")
    done = subprocess.run([sys.executable, "-m", "tasks.symreg.csv", str(tmp_path / "data.csv"), "--out",
                           str(tmp_path / "spec")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    spec = Path(done.stdout.strip())
    assert spec == tmp_path / "spec" / "problem.toml" and 'name = "data"' in spec.read_text()
    evaluate = scorer(tmp_path / "spec")
    truth = evaluate(with_block(tmp_path / "spec", "x0**2 + sin(x1)"))
    assert truth["exact"] == 1.0 and [truth[name] for name in REGION_NAMES] == [1.0] * REGIONS
    half = evaluate(with_block(tmp_path / "spec", "x0**2"))
    assert half["valid"] == 1.0 and half["exact"] == 0.0 and 0 < min(half[name] for name in REGION_NAMES) < 1
    assert json.loads(evo("check", str(spec), "--json").stdout.strip().splitlines()[-1])["scalar"] > 0
    evo("run", str(spec), "--policy", "mutate:", "--iterations", "12", "--out", str(tmp_path / "run"), "--quiet")


def test_the_shipped_regression_example_is_the_curve_docs_name(tmp_path):
    """examples/regression/data.csv (docs/tasks.md's compare example): its truth is exact there."""
    example = Path(__file__).resolve().parents[1] / "examples" / "regression" / "data.csv"
    done = subprocess.run([sys.executable, "-m", "tasks.symreg.csv", str(example), "--out", str(tmp_path / "fit")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    truth = scorer(tmp_path / "fit")(with_block(tmp_path / "fit", "x0**3 + x0**2 + x0"))
    assert truth["exact"] == 1.0 and min(truth[name] for name in REGION_NAMES) > 0.9999  # y is written to 6 decimals


def test_a_bad_csv_is_one_clear_line(tmp_path):
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    done = subprocess.run([sys.executable, "-m", "tasks.symreg.csv", str(tmp_path / "bad.csv"), "--out",
                           str(tmp_path / "spec")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "x0" in done.stderr and "Traceback" not in done.stderr
