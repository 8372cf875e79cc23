"""Every `evo` command in the README and docs parses against the CLI as it is (its
subcommand exists, every flag exists and takes the value written), and the README's
"Your own problem" path runs as written, from a copy of the example, start to report.
Commands that need hours or a GPU are checked for their flags here, not run."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from evo.cli import cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def bash_blocks(text: str) -> list[str]:
    """The shell blocks of a markdown page: fenced with bash / sh / shell / console or with no
    language (fences paired line by line, so a python block's closing fence opens nothing)."""
    blocks, lines, language = [], [], None
    for line in text.splitlines():
        if line.startswith("```"):
            if language is None:
                language, lines = line[3:].strip(), []
            else:
                if language in ("", "bash", "sh", "shell", "console"):
                    blocks.append("\n".join(lines) + "\n")
                language = None
        elif language is not None:
            lines.append(line)
    return blocks


def evo_commands(text: str) -> list[str]:
    """The `evo ...` command lines of a page's shell blocks (continuations joined, comments
    cut; `evo` after `&&` counts too, and so does a launcher's `-m evo ...`, as in
    `accelerate launch --config_file C -m evo train ...`)."""
    found = []
    for block in bash_blocks(text):
        for line in block.replace("\\\n", " ").splitlines():
            for part in re.split(r"\s*(?:&&|;\s)\s*", line.strip().removeprefix("$ ")):
                launched = re.search(r"\s-m (evo .*)", part)
                if part.startswith("evo ") or launched:
                    found.append(part if part.startswith("evo ") else launched.group(1))
    return found


def problem(command: str) -> str:
    """Why `command` would not parse with today's CLI ('' when it does)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError as error:
        return f"not shell words ({error})"
    words = [w for w in words[1:]]
    if not words or words[0].startswith("-"):
        return ""
    group = click.Context(cli)
    sub = cli.get_command(group, words[0])
    if sub is None:
        return f"no command 'evo {words[0]}'"
    try:
        sub.make_context(words[0], words[1:], parent=group)
    except click.BadParameter as error:
        if "does not exist" not in str(error):  # a path the reader makes first is fine
            return str(error)
    except click.ClickException as error:
        return str(error)
    return ""


COMMANDS = [(page.relative_to(ROOT).as_posix(), c) for page in DOCS for c in evo_commands(page.read_text())]


def test_the_docs_hold_commands_to_check():
    pages = {page for page, _ in COMMANDS}
    assert "README.md" in pages and len(COMMANDS) >= 20


@pytest.mark.parametrize("page,command", COMMANDS, ids=[f"{p}:{i}" for i, (p, _) in enumerate(COMMANDS)])
def test_a_documented_command_parses_with_todays_cli(page, command):
    assert problem(command) == "", f"{page}: {command}"


def test_the_checker_catches_a_stale_flag_a_bad_value_and_a_missing_command():
    assert "--bogus" in problem("evo run spec.toml --policy mutate: --bogus 1")
    assert "integer" in problem("evo run spec.toml --iterations many")
    assert "no command" in problem("evo frobnicate x")
    assert problem("evo run missing.toml --policy mutate: --iterations 5 --out runs/x") == ""
    launched = evo_commands("```bash\ntorchrun --nproc-per-node 2 -m evo train --engine trl --bogus 1\n```\n")
    assert launched == ["evo train --engine trl --bogus 1"] and "--bogus" in problem(launched[0])


def own_problem_block() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Your own problem"):]
    return next(b for b in bash_blocks(section) if "cp -r examples/" in b)


def test_the_readmes_own_problem_path_runs_as_written(tmp_path):
    """cp, check, run, show --failures, show --program, report: each exits 0 in a fresh folder,
    and the run (mutate:, the README's iterations, evo run's fixed default seed 0) improves on
    the initial program, as the README says it does."""
    lines = [line.split("  #")[0].strip() for line in own_problem_block().splitlines() if line.strip()]
    example = re.match(r"cp -r (\S+) (\S+)", lines[0])
    shutil.copytree(ROOT / example.group(1), tmp_path / example.group(2))
    for line in lines[1:]:
        words = shlex.split(line)
        assert words[0] == "evo", line
        done = subprocess.run([sys.executable, "-m", "evo", *words[1:]], cwd=tmp_path, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, f"{line}: {done.stderr[-500:]}"
    assert (tmp_path / "runs" / "mine" / "report.html").exists()
    run = json.loads((tmp_path / "runs" / "mine" / "run.json").read_text())
    iterations = re.search(r"evo run .*--policy mutate: --iterations (\d+)", own_problem_block()).group(1)
    assert run["policy"] == "mutate:" and run["seed"] == 0 and run["overrides"] == {"search.iterations": int(iterations)}
    report, initial = (json.loads(subprocess.run([sys.executable, "-m", "evo", "show", "runs/mine", "--json", *more],
                                                 cwd=tmp_path, capture_output=True, text=True, timeout=120).stdout)
                       for more in ([], ["--program", "1"]))
    assert initial["policy"] == "initial" and report["policies"]["mutate:"]["improvements"] >= 1, report["policies"]
    assert report["best"]["scalar"] > initial["scalar"], (report["best"]["scalar"], initial["scalar"])
