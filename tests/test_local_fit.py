"""`local:` refuses a spec whose prompts cannot fit the checkpoint's context before its
weights load, and names the shipped checkpoints' tasks and contexts."""

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from evo import spec as spec_module
from evo.errors import UserError
from evo.policies import fit

ROOT = Path(__file__).resolve().parents[1]


def test_a_python_problem_does_not_fit_a_shipped_maze_checkpoint():
    spec = spec_module.load(ROOT / "examples" / "function_minimization" / "problem.toml")
    with pytest.raises(UserError, match=r"more than the model's context of 512.*maze-warmup \(maze, 512 tokens\)"
                                        r".*openai:URL#MODEL;chat.*vllm:PATH"):
        fit.check(spec, "local:maze-warmup")
    fit.check(spec, "mutate:")  # other policies: nothing to check


def test_the_maze_example_fits_its_checkpoint():
    spec = spec_module.load(ROOT / "examples" / "maze_evolution" / "problem.toml")
    fit.check(spec, "local:maze-warmup")
    assert 0 < len(fit.smallest_prompt(spec)) < 512


@pytest.mark.slow
def test_evo_run_refuses_before_loading_and_keeps_no_directory(tmp_path):
    evo = shutil.which("evo") or pytest.skip("the evo console script is not installed")
    out = tmp_path / "run"
    start = time.monotonic()
    result = subprocess.run([evo, "run", str(ROOT / "examples" / "function_minimization" / "problem.toml"),
                             "--policy", "local:maze-grpo", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "local:maze-grpo: the smallest prompt of" in result.stderr and not out.exists()
    print(f"refused after {time.monotonic() - start:.1f} s")
