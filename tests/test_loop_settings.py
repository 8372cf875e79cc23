"""The loop's settings are one typed frozen dataclass from the spec and the command line to the
loop: `evo run`'s loop flags are RunOptions' fields, run.json stores them under "loop" and reads
them back as RunOptions, and LoopConfig.of maps the spec's [search] and [prompt] tables for the
CLI and the Python API alike."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from evo import run_dir
from evo.loop import LoopConfig, RunOptions
from evo.spec import PromptSettings, SearchSettings

NGUYEN7 = Path(__file__).resolve().parents[1] / "examples" / "nguyen7" / "problem.toml"


def test_run_options_are_frozen_and_part_of_the_loop_config():
    options = RunOptions(batch=3, depth=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.batch = 5  # type: ignore[misc]
    assert options.lag == 3 and LoopConfig(batch=3, depth=1).lag == 3
    names = [f.name for f in dataclasses.fields(RunOptions)]
    assert names == ["batch", "depth", "max_new_tokens", "temperature", "top_p"]
    assert [f.name for f in dataclasses.fields(LoopConfig)][: len(names)] == names
    assert run_dir.RUN_OPTIONS == tuple(names)


def test_evo_run_has_one_flag_per_run_option_with_its_default():
    from evo.commands.run import command

    flags = {opt: param for param in command.params for opt in param.opts}
    for f in dataclasses.fields(RunOptions):
        flag = flags["--" + f.name.replace("_", "-")]
        assert flag.default is None  # unset: the default for a new run, the stored value for a resumed one
        if f.default is not None:
            assert f"(default {f.default})" in flag.help


def test_the_spec_tables_map_onto_every_spec_field_of_the_loop_config():
    search = SearchSettings(iterations=7, samples_per_prompt=3, target=0.5, max_program_bytes=100, answers=2,
                            answers_by="samples")
    prompt = PromptSettings(style="diff", system="be brief", feedback=False, separator="--", answer_pattern="<a>.*?</a>")
    run = RunOptions(batch=1, depth=3, max_new_tokens=9, temperature=0.5, top_p=0.9)
    config = LoopConfig.of(search, prompt, 11, run)
    assert (config.iterations, config.samples, config.target, config.max_program_bytes, config.answers,
            config.answers_by) == (7, 3, 0.5, 100, 2, "samples")
    assert (config.style, config.system, config.feedback, config.separator, config.answer_pattern) == (
        "diff", "be brief", False, "--", "<a>.*?</a>")
    assert dataclasses.asdict(run).items() <= dataclasses.asdict(config).items() and config.seed == 11
    changed = {f.name for f in dataclasses.fields(LoopConfig) if getattr(config, f.name) != f.default}
    not_from_the_spec = {"stop", "policy_answers", "policy_styles", "policy_tokens", "set_head", "head"}  # the run's, or a file the spec names (empty here)
    assert changed == {f.name for f in dataclasses.fields(LoopConfig)} - not_from_the_spec
    assert LoopConfig.of(SearchSettings(answers=0), PromptSettings()).answers == 1  # 0: the policy's own, else 1
    assert LoopConfig.of(search, prompt, 11, run, iterations=2).iterations == 2


def test_run_json_stores_the_run_options_and_a_resume_replaces_only_the_flags_given(tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "evo", "run", str(NGUYEN7), "--policy", "mutate:", "--iterations", "2",
                           "--batch", "1", "--depth", "3", "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    stored = json.loads((out / "run.json").read_text())["loop"]
    assert stored == {"batch": 1, "depth": 3, "max_new_tokens": None, "temperature": 1.0, "top_p": 1.0}
    assert run_dir.RunConfig.read(out).loop == RunOptions(batch=1, depth=3)
    resumed = run_dir.resume_config(out, {}, {"top_p": 0.5}, None)
    assert resumed.loop == RunOptions(batch=1, depth=3, top_p=0.5)
    loop = run_dir.loop_config(resumed.spec(), resumed)
    assert (loop.batch, loop.depth, loop.top_p, loop.iterations) == (1, 3, 0.5, 2)
