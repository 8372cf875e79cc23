"""Session-wide test setup, and a real run directory for the tests that read one."""

import signal
import subprocess
import sys
from pathlib import Path

import pytest

# A shell that starts a job in the background without job control (`cmd &` in a script) starts
# it with SIGINT ignored, and an ignored signal stays ignored across exec: the Ctrl-C tests'
# children would never see their SIGINT. A handler is reset to the default at exec, so the
# children get a working Ctrl-C again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

NGUYEN7 = Path(__file__).resolve().parents[1] / "examples" / "nguyen7" / "problem.toml"
NGUYEN7_ITERATIONS = 12


@pytest.fixture(scope="session")
def nguyen7_run(tmp_path_factory) -> Path:
    """A real run directory: `evo run examples/nguyen7/problem.toml --policy mutate:` for 12
    iterations (seed 0, about two seconds), shared by the tests that read a run."""
    out = tmp_path_factory.mktemp("nguyen7") / "run"
    done = subprocess.run([sys.executable, "-m", "evo", "run", str(NGUYEN7), "--policy", "mutate:", "--iterations",
                           str(NGUYEN7_ITERATIONS), "--seed", "0", "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out
