"""The install lines of the README, the docs and CI name extras that pyproject.toml defines, the
quick start takes torch's CPU build, the test command installs what the tests import (`dev`),
and on a machine with no local wheel the README's torch line resolves to the CPU build: pip runs
it (dry run) against two local indexes standing in for PyPI (the CUDA build) and PyTorch's CPU
index."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.test_docs_commands import bash_blocks

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def pip_installs(text: str) -> list[list[str]]:
    """The words of each `pip install ...` command in `text` (shell lines, `&&` chains split)."""
    found = []
    for line in text.replace("\\\n", " ").splitlines():
        for part in re.split(r"\s*&&\s*", line.strip()):
            if re.search(r"\bpip install\b", part):
                words = shlex.split(part, comments=True)
                found.append(words[words.index("install") + 1:])
    return found


def readme_installs() -> list[list[str]]:
    return [w for block in bash_blocks((ROOT / "README.md").read_text()) for w in pip_installs(block)]


def extras_named(words: list[str]) -> set[str]:
    """The extras an install names: `.[a,b]`, `-e '.[a]'`, `vpo-evo[a]`."""
    named: set[str] = set()
    for word in words:
        match = re.fullmatch(r"(?:\.|vpo-evo)\[([^\]]*)\]", word)
        if match:
            named.update(e.strip() for e in match.group(1).split(","))
    return named


def test_every_named_extra_exists():
    defined = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    texts = [(ROOT / ".ci" / "run").read_text()]
    for page in PAGES:  # shell blocks and inline code such as `pip install 'vpo-evo[vllm]'`
        texts += bash_blocks(page.read_text()) + re.findall(r"`([^`\n]*pip install[^`\n]*)`", page.read_text())
    named = set().union(*(extras_named(words) for text in texts for words in pip_installs(text)))
    assert named, "no install line names an extra: the parser found nothing"
    assert named <= defined, f"install lines name extras pyproject.toml lacks: {sorted(named - defined)}"


def test_quick_start_takes_cpu_torch_and_tests_install_dev():
    installs = readme_installs()
    torch_lines = [w for w in installs if any(x.startswith("torch") for x in w)]
    assert torch_lines and all(CPU_INDEX in w for w in torch_lines), torch_lines
    blocks = bash_blocks((ROOT / "README.md").read_text())
    pytest_blocks = [b for b in blocks if "pytest" in b]
    assert pytest_blocks and all("dev" in extras_named([x for w in pip_installs(b) for x in w])
                                 for b in pytest_blocks), pytest_blocks
    ci = pip_installs((ROOT / ".ci" / "run").read_text())
    assert any("dev" in extras_named(w) for w in ci)
    assert any(CPU_INDEX in w for w in ci if any(x.startswith("torch") for x in w))


def fake_wheel(folder: Path, version: str, requires: list[str]) -> None:
    """A wheel named torch with metadata only: what a dry-run resolution reads."""
    name = f"torch-{version}-py3-none-any.whl"
    info = f"torch-{version.split('+')[0]}.dist-info"
    metadata = "Metadata-Version: 2.1\nName: torch\nVersion: %s\n%s" % (
        version, "".join(f"Requires-Dist: {r}\n" for r in requires))
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / name, "w") as wheel:
        wheel.writestr(f"{info}/METADATA", metadata)
        wheel.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{info}/RECORD", "")
    (folder / "index.html").write_text(f'<html><body><a href="{name}">{name}</a></body></html>')


def fake_project(index: Path, project: str) -> None:
    """A pure wheel for `project` at version 1.0 in the simple index `index`."""
    folder = index / project
    folder.mkdir(parents=True, exist_ok=True)
    dist = project.replace("-", "_")
    name = f"{dist}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(folder / name, "w") as wheel:
        wheel.writestr(f"{dist}-1.0.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {project}\nVersion: 1.0\n")
        wheel.writestr(f"{dist}-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{dist}-1.0.dist-info/RECORD", "")
    (folder / "index.html").write_text(f'<html><body><a href="{name}">{name}</a></body></html>')


def resolve(words: list[str], pypi: Path, cpu: Path, report: Path) -> dict[str, str]:
    """Name -> version pip would install for `pip install WORDS`, with `pypi` as the default index,
    `cpu` standing in for PyTorch's CPU index and no pip configuration of this machine."""
    words = [w.replace(CPU_INDEX, cpu.as_uri()) for w in words]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env |= {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": pypi.as_uri(), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q",
                    "--report", str(report), *words], check=True, env=env, timeout=120)
    chosen = json.loads(report.read_text())["install"]
    return {item["metadata"]["name"]: item["metadata"]["version"] for item in chosen}


@pytest.mark.slow
def test_readme_torch_line_resolves_to_the_cpu_build_without_a_local_wheel(tmp_path):
    pypi, cpu = tmp_path / "pypi", tmp_path / "cpu"
    fake_wheel(pypi / "torch", "2.13.0", ["nvidia-cuda-runtime"])  # PyPI's Linux torch pulls CUDA
    fake_project(pypi, "nvidia-cuda-runtime")
    fake_wheel(cpu / "torch", "2.13.0+cpu", [])
    (torch_line,) = [w for w in readme_installs() if any(x.startswith("torch") for x in w)]
    assert resolve(torch_line, pypi, cpu, tmp_path / "readme.json") == {"torch": "2.13.0+cpu"}
    plain = [w for w in torch_line if not w.startswith("--") and CPU_INDEX not in w]
    assert resolve(plain, pypi, cpu, tmp_path / "plain.json") == {"torch": "2.13.0", "nvidia-cuda-runtime": "1.0"}
