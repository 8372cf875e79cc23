"""`evo train` end to end in a real subprocess: run, resume, and one-line user errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from evo import tiny
from training import checkpoint

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("init")
    tok = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tok, context=512), tok, path)
    return path


def evo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evo", "train", *args], capture_output=True, text=True, timeout=300)


def test_train_resume_and_errors(init_dir, tmp_path):
    out = tmp_path / "run"
    common = ["--task", "maze", "--init", str(init_dir), "--out", str(out), "--prompts", "2", "--group", "2",
              "--max-new-tokens", "8", "--no-progress"]
    first = evo(*common, "--algo", "vpo", "--steps", "1", "--option", "K=10", "--option", "sobol=True")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout.strip().splitlines()[-1])["algo"] == "vpo"
    again = evo(*common, "--algo", "vpo", "--steps", "2")
    assert again.returncode == 2 and "--resume" in again.stderr and "Traceback" not in again.stderr
    resumed = evo("--out", str(out), "--resume", "--steps", "2", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    assert [r["step"] for r in checkpoint.read_metrics(out)] == [1, 2]

    nothing = evo("--out", str(tmp_path / "empty"), "--resume")
    assert nothing.returncode == 2 and "no trainer checkpoint" in nothing.stderr
    bad = evo(*common[:-3], "--out", str(tmp_path / "bad"), "--algo", "grpo", "--steps", "1", "--option", "nope=1")
    assert bad.returncode == 2 and "bad --option" in bad.stderr and "Traceback" not in bad.stderr
    missing = evo("--task", "maze", "--init", str(tmp_path), "--out", str(tmp_path / "x"))
    assert missing.returncode == 2 and "config.json" in missing.stderr
