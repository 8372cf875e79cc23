"""Scorer and candidate both get a writable working directory, HOME and TMPDIR in every
isolation mode, and the candidate cannot reach the scorer's (OpenEvolve's circle_packing
evaluator writes a temporary script and runs it in a subprocess)."""

import textwrap
from pathlib import Path

import numpy as np
import pytest

from evo import spec
from evo.sandbox import Sandbox
from evo.sandbox.isolation import namespaces_available

needs_root = pytest.mark.skipif(not namespaces_available(), reason="namespaces need root (and a kernel that allows them)")

# the pattern of OpenEvolve's circle_packing evaluator (written here, not copied): run the
# candidate in a subprocess through a temporary script, read its results back from a file
TEMP_SCRIPT_SCORER = """
import os, pickle, subprocess, sys, tempfile

def evaluate(program_path):
    try:
        with tempfile.NamedTemporaryFile(suffix=".py", delete=False) as script:
            script.write(f'''
import importlib.util, pickle
spec = importlib.util.spec_from_file_location("program", {program_path!r})
program = importlib.util.module_from_spec(spec)
spec.loader.exec_module(program)
with open(__file__ + ".results", "wb") as out:
    pickle.dump(program.run(), out)
'''.encode())
        done = subprocess.run([sys.executable, script.name], capture_output=True, timeout=20)
        if done.returncode != 0:
            raise RuntimeError(done.stderr.decode()[-300:])
        with open(script.name + ".results", "rb") as results:
            value = pickle.load(results)
        with open("notes.txt", "w") as notes:  # the working directory, too
            notes.write("ok")
        with open(os.path.join(os.environ["HOME"], ".cache-probe"), "w") as probe:
            probe.write("ok")
        return {"a": float(value), "b": 1.0}
    except Exception as error:
        print("evaluation failed:", error)
        return {"a": 0.0, "b": 0.0}
"""

CANDIDATE = """
import os, tempfile
def run():
    with tempfile.NamedTemporaryFile(delete=False) as own:
        own.write(b"x")
    with open("mine.txt", "w") as mine:
        mine.write("ok")
    return 0.364
"""


def _sandbox(tmp_path: Path, body: str, isolation: str, namespaces: str) -> Sandbox:
    path = tmp_path / "score.py"
    path.write_text(textwrap.dedent(body))
    limits = spec.SandboxLimits(workers=1, timeout=30.0, memory_mb=512, isolation=isolation)
    return Sandbox(f"{path}:evaluate", ("a", "b"), limits, namespaces=namespaces)


@pytest.mark.parametrize("isolation", ["process", "shared", "none"])
@pytest.mark.parametrize("namespaces", [pytest.param("on", marks=needs_root), "off"])
def test_a_scorer_that_writes_a_temp_script_and_runs_it(tmp_path, monkeypatch, isolation, namespaces):
    if isolation == "none" and namespaces == "on":
        pytest.skip("isolation none has no namespaces")
    monkeypatch.chdir(tmp_path)  # (isolation "none": the scorer's working directory is the search process's)
    with _sandbox(tmp_path, TEMP_SCRIPT_SCORER, isolation, namespaces) as box:
        evaluation = box.evaluate(CANDIDATE)
    assert evaluation.ok, evaluation.failure
    assert np.allclose(evaluation.scores, [0.364, 1.0]), evaluation.output


PEEK = """
import os
from evo.sandbox import candidate

def evaluate(path):
    with open("secret.txt", "w") as secret:  # the scorer's own directory (its cwd)
        secret.write("answer")
    found = candidate.load(path).peek(os.getcwd())
    return {"a": 1.0, "b": 1.0, **found}
"""

PEEKING_CANDIDATE = """
import os
def peek(scorer_dir):
    found = {}
    top = os.path.dirname(os.getcwd())
    for name, target in (("write_scorer", os.path.join(scorer_dir, "forged.txt")),
                         ("replace_secret", os.path.join(scorer_dir, "secret.txt")),
                         ("write_top", os.path.join(top, "forged.txt"))):
        try:
            open(target, "w").close()
            found[name] = 1.0
        except OSError:
            found[name] = 0.0
    try:
        os.listdir(scorer_dir)
        found["list_scorer"] = 1.0
    except OSError:
        found["list_scorer"] = 0.0
    found["own_cwd_is_scorer"] = float(os.path.realpath(os.getcwd()) == os.path.realpath(scorer_dir))
    return found
"""


@pytest.mark.parametrize("namespaces", [pytest.param("on", marks=needs_root), "off"])
def test_the_candidate_cannot_touch_the_scorers_directory(tmp_path, namespaces):
    if not namespaces_available():
        pytest.skip("separate users need root")
    with _sandbox(tmp_path, PEEK, "process", namespaces) as box:
        evaluation = box.evaluate(PEEKING_CANDIDATE)
    assert evaluation.ok, (evaluation.failure, evaluation.output)
    assert evaluation.extras == {"write_scorer": 0.0, "replace_secret": 0.0, "write_top": 0.0, "list_scorer": 0.0,
                                 "own_cwd_is_scorer": 0.0}


KEY_SCORER = """
import os
from evo.sandbox import candidate

def evaluate(path):
    with open("answers.json", "w") as key:  # the scorer's answer key, in its own directory (its cwd)
        key.write("the answer")
    program = candidate.load(path)
    found = program.attack(os.getcwd())
    try:  # "compare the output with the answer key"
        with open(os.path.join(os.path.dirname(path), "output.txt")) as output:
            matched = float(output.read() == "the answer")
    except OSError:
        matched = 0.0
    return {"a": matched, "b": 1.0, **found}
"""

GUESSING_CANDIDATE = """
import os
def attack(scorer_dir):
    found = {}
    try:  # the key's name guessed, next to the candidate's own directory
        with open(os.path.join(os.path.dirname(os.getcwd()), "scorer", "answers.json")) as key:
            found["read_key"] = float(key.read() == "the answer")
    except OSError:
        found["read_key"] = 0.0
    for name, make in (("symlink", os.symlink), ("hardlink", os.link)):
        target = os.path.join(scorer_dir, "answers.json")
        try:
            make(target, f"{name}.txt")
            found[name] = 1.0
        except OSError:
            found[name] = 0.0
    if found["symlink"]:
        os.replace("symlink.txt", "output.txt")  # the scorer reads the link as the candidate's output
    return found
"""


def _attack(tmp_path: Path, namespaces: str):
    if not namespaces_available():
        pytest.skip("separate users need root")
    with _sandbox(tmp_path, KEY_SCORER, "process", namespaces) as box:
        evaluation = box.evaluate(GUESSING_CANDIDATE)
    assert evaluation.ok, (evaluation.failure, evaluation.output)
    return evaluation


@pytest.mark.parametrize("namespaces", [pytest.param("on", marks=needs_root), "off"])
def test_the_candidate_cannot_read_a_scorers_file_by_guessing_its_name(tmp_path, namespaces):
    assert _attack(tmp_path, namespaces).extras["read_key"] == 0.0  # the scorer's umask is 077


@pytest.mark.parametrize("namespaces", [pytest.param("on", marks=needs_root), "off"])
def test_the_scorer_never_reads_a_link_the_candidate_left_in_its_directory(tmp_path, namespaces):
    evaluation = _attack(tmp_path, namespaces)
    assert evaluation.scores[0] == 0.0  # the key was not compared with itself
    assert (evaluation.extras["symlink"], evaluation.extras["hardlink"]) == (0.0, 0.0)
