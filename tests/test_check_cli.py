"""`evo check` through the installed console script, in a real subprocess."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "function_minimization"
EVO = shutil.which("evo") or pytest.skip("the evo console script is not installed", allow_module_level=True)


def evo(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([EVO, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    for name in ("problem.toml", "initial.py", "score.py"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    return tmp_path


def test_check_prints_vector_scalar_and_features():
    result = evo("check", str(EXAMPLE / "problem.toml"))
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(None, 1) for line in result.stdout.splitlines() if line.strip())
    assert set(lines["scores"].split()) and all(f"{n}=" in lines["scores"] for n in ("sphere", "rastrigin", "rosenbrock", "ackley"))
    assert 0 < float(lines["scalar"]) < 1 and "length=" in lines["features"]


def test_check_json_shape(copy):
    result = evo("check", "--json", "problem.toml", cwd=copy)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert list(report["scores"]) == ["sphere", "rastrigin", "rosenbrock", "ackley"]
    assert report["scalar"] == pytest.approx(sum(report["scores"].values()) / 4)
    assert report["features"]["length"] == len((copy / "initial.py").read_text())
    assert report["features"]["rastrigin"] == report["scores"]["rastrigin"]


def test_a_typo_is_one_line_and_exit_2(copy):
    spec = copy / "problem.toml"
    spec.write_text(spec.read_text().replace("timeout = 20.0", "timout = 20.0"))
    result = evo("check", str(spec))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.stderr
    assert "[sandbox] unknown key 'timout' (did you mean 'timeout'?)" in result.stderr and str(spec) in result.stderr


def test_a_failing_initial_program_exits_1(copy):
    (copy / "initial.py").write_text("def minimize(f, dim, bounds, budget, rng):\n    raise RuntimeError('broken on purpose')\n")
    result = evo("check", "--json", str(copy / "problem.toml"))
    assert result.returncode == 1
    assert json.loads(result.stdout) == {"error": {"kind": "exception", "message": json.loads(result.stdout)["error"]["message"]},
                                         "output": ""}
    assert "RuntimeError: broken on purpose" in result.stdout
    text = evo("check", str(copy / "problem.toml"))
    assert text.returncode == 1 and "failed    exception: RuntimeError: broken on purpose" in text.stdout


def test_a_broken_scorer_is_a_usage_error(copy):
    (copy / "score.py").write_text("import no_such_module_xyz\n")
    result = evo("check", str(copy / "problem.toml"))
    assert result.returncode == 2 and "No module named 'no_such_module_xyz'" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_lists_check():
    result = subprocess.run([sys.executable, "-m", "evo", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "check" in result.stdout


def test_check_a_text_program(tmp_path):
    (tmp_path / "route.txt").write_text("UP UP LEFT\n")
    (tmp_path / "score.py").write_text("def evaluate(path):\n    return [len(open(path).read().split()) / 10]\n")
    (tmp_path / "spec.toml").write_text('[problem]\nprogram = "route.txt"\nscorer = "score.py:evaluate"\nobjectives = ["moves"]\n')
    result = evo("check", "--json", str(tmp_path / "spec.toml"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["scores"] == {"moves": 0.3}


FOUR = """[problem]
program = "initial.py"
scorer = "score.py:evaluate"
objectives = ["cost", "a", "b", "seconds"]
minimize = ["cost", "seconds"]
{features}
[sandbox]
isolation = "none"
"""


def four_objectives(tmp_path: Path, cost: float, features: str = "") -> Path:
    """The issue's own problem: four objectives, two minimized, `cost` of its own scale."""
    (tmp_path / "initial.py").write_text("x = 1\n")
    (tmp_path / "score.py").write_text(f"def evaluate(path):\n    return {{'cost': {cost}, 'a': 0.4, 'b': 0.0, 'seconds': 0.02}}\n")
    (tmp_path / "spec.toml").write_text(FOUR.format(features=features))
    return tmp_path / "spec.toml"


def test_objectives_of_unequal_scale_are_one_warning_with_the_fix(tmp_path):
    spec = four_objectives(tmp_path, 21.0)
    result = evo("check", "--json", str(spec))
    assert result.returncode == 0 and json.loads(result.stdout)["scores"]["cost"] == 21.0  # stdout stays JSON
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("warning: objective scales differ by more than 10x (cost about 21, ")
    assert "divide each objective by a fixed typical size" in line and "docs/spec.md" in line
    assert "warning: objective scales" in evo("check", str(spec)).stderr
    normalized = evo("check", str(four_objectives(tmp_path, 21.0 / 25)))
    assert normalized.returncode == 0 and normalized.stderr == ""  # b = 0 and seconds = 0.02 say nothing of a scale


def test_a_declared_objective_range_gives_its_scale(tmp_path):
    declared = '\n[features.cost]\nsource = "objective:cost"\nrange = [-400.0, 0.0]\nbins = 4\n'
    result = evo("check", str(four_objectives(tmp_path, 0.0, declared)))  # the initial program costs nothing
    assert result.returncode == 0 and "(cost about 400, " in result.stderr
