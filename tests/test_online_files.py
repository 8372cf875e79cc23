"""RUN/online/ of `evo run --train` read as untrusted input: a planted pickle, hostile or damaged
settings, state, group and metrics files, a full disk, a read-only directory and a checkpoint of
another size are each one line (exit 2) with nothing on disk lost; every training option is
checked before any work, in `evo run` and `evo compare` alike; a non-finite step is never applied."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from evo import report
from evo.report.summary import summary
from evo.errors import UserError
from evo.report.page import render
from tests.evo_cli import refused
from tests.test_online_training import init_dir  # noqa: F401 -- the fixture: a tiny untrained model
from training import tiny

pytestmark = pytest.mark.slow
SPEC = "examples/nguyen7/problem.toml"


def run_args(init_dir, out, iterations: int = 3) -> list[str]:
    return ["run", SPEC, "--policy", f"local:{init_dir}", "--train", "grpo", "--train-every", "1", "--iterations",
            str(iterations), "--batch", "1", "--depth", "1", "--set", "prompt.style=continue", "--max-new-tokens", "12",
            "--seed", "5", "--quiet", "--out", str(out)]


def evo(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evo", *args], capture_output=True, text=True, timeout=300)


def resume(run, iterations: int = 5) -> subprocess.CompletedProcess:
    return evo("run", "--resume", str(run), "--iterations", str(iterations), "--quiet")




@pytest.fixture(scope="module")
def trained(init_dir, tmp_path_factory):
    """A run of 3 iterations that took one training step (copy it before changing it)."""
    out = tmp_path_factory.mktemp("trained") / "run"
    done = evo(*run_args(init_dir, out))
    assert done.returncode == 0, done.stderr
    assert len((out / "online" / "metrics.jsonl").read_text().splitlines()) == 1
    return out


@pytest.fixture(scope="module")
def whole(trained, tmp_path_factory):
    """The same run resumed to 5 iterations without a fault: three steps."""
    out = tmp_path_factory.mktemp("whole") / "run"
    shutil.copytree(trained, out)
    done = resume(out)
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture
def run(trained, tmp_path):
    shutil.copytree(trained, tmp_path / "run")
    return tmp_path / "run"


def one_line(done: subprocess.CompletedProcess, *words: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    line = done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr and all(w in line for w in words), done.stderr[-2000:]
    return line


def weights(run) -> dict:
    return torch.load(run / "online" / "state.pt", weights_only=True)["model"]


class Planted:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_planted_in_the_state_file_does_not_run(run, tmp_path):
    marker = tmp_path / "ran"
    torch.save({"model": Planted(str(marker)), "optimizer": {}, "step": 1, "seconds": 0.0}, run / "online" / "state.pt")
    one_line(resume(run), "state.pt", "not a readable training state")
    assert not marker.exists()


def test_hostile_settings_reach_neither_the_report_page_nor_the_terminal(run, capsys):
    settings = json.loads((run / "online" / "settings.json").read_text())
    (run / "online" / "settings.json").write_text(json.dumps({**settings, "every": "<img src=x onerror=alert(1)>"}))
    assert "settings.json" in refused(capsys, "report", str(run))
    assert not (run / "report.html").exists()
    (run / "online" / "settings.json").write_text(json.dumps({**settings, "algo": "\x1b]0;owned\x07\x1b[2Jgrpo"}))
    line = refused(capsys, "show", str(run))
    assert "settings.json" in line and "\x1b" not in line and "\x07" not in line
    # the page escapes the section's values whatever reaches it
    page = {"name": "r", "iterations": 0, "programs": 0, "failed": 0, "best": None, "curves": {"iterations": []},
            "front": {"points": []}, "grid": None, "lineage": [], "policies": {}, "failures": {}, "why": [], "why_unparsed": [],
            "training": {"algo": "<b>", "every": "<img src=x onerror=alert(1)>", "steps": "<i>", "seconds": 0.0,
                         "curve": []}}
    html = render(page)
    assert "<img" not in html and "<b>" not in html and "<i>" not in html


@pytest.mark.parametrize("damage", [
    "not json", "[]", '{"every": 1}', '{"algo": 5}', '{"algo": "nope"}', '{"algo": "vpo"}', '{"algo": "grpo", "every": "x"}',
    '{"algo": "grpo", "every": 0}', '{"algo": "grpo", "every": true}', '{"algo": "grpo", "train": []}',
    '{"algo": "grpo", "train": {"lr": "abc"}}', '{"algo": "vpo_front", "options": {"K": 0}}',
    '{"algo": "grpo", "extra": 1}', '{"algo": "grpo", "options": {"K": 1}}',
])
def test_a_damaged_settings_file_is_one_line_for_resume_and_show(run, damage):
    (run / "online" / "settings.json").write_text(damage)
    one_line(resume(run), "settings.json")
    if damage in ('{"algo": "nope"}', '{"algo": "vpo"}', '{"algo": "grpo", "train": {"lr": "abc"}}',
                  '{"algo": "vpo_front", "options": {"K": 0}}', '{"algo": "grpo", "options": {"K": 1}}'):
        return  # well typed: evo show reads them (only training checks an estimator's name and options)
    one_line(evo("show", str(run)), "settings.json")


@pytest.mark.parametrize("damage", [b"", b"PK\x03\x04 half a zip", b"garbage" * 100, "no step", "step as text"])
def test_a_damaged_state_file_is_one_line_and_nothing_else_changes(run, damage):
    state = run / "online" / "state.pt"
    if damage == "no step":
        torch.save({"model": {}, "optimizer": {}}, state)
    elif damage == "step as text":
        good = torch.load(state, weights_only=True)
        torch.save({**good, "step": "1"}, state)
    else:
        state.write_bytes(damage)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != "run.lock"}
    one_line(resume(run), "state.pt")
    assert {p: p.read_bytes() for p in before} == before


GROUP_DAMAGES = {  # name -> (what it does to a group file's JSON, words of the one line)
    "token": (lambda g: g["completions"][0].__setitem__(1, [10**9]), "not a group"),
    "asked as text": (lambda g: g.update(asked="0"), "not a group"),
    "asked 2**70": (lambda g: g.update(asked=2**70), "after its own iteration"),
    "asked -1": (lambda g: g.update(asked=-1), "not a group"),
    "no prompt": (lambda g: g.update(prompt=[]), "no prompt token ids"),
    "no token ids": (lambda g: g["completions"][2].__setitem__(1, []), "completion 2 has text but no token ids"),
    "finish unknown": (lambda g: g["completions"][0].__setitem__(2, "\x1b[2Jweird"), "not one of stop, length"),
    "a completion fewer": (lambda g: g["completions"].pop(), "holds 3 completions", "journals 4 per prompt"),
    "a completion more": (lambda g: g["completions"].append(g["completions"][0]), "holds 5 completions"),
}


def damage_group(run, damage: str) -> tuple[str, ...]:
    """Damage iteration 1's group file (trained on by the next step); the words its line says."""
    group = run / "online" / "groups" / "00000001.json"
    if damage == "missing":
        group.unlink()
        return ()
    if damage not in GROUP_DAMAGES:
        group.write_text(damage)
        return ()
    data = json.loads(group.read_text())
    change, *words = GROUP_DAMAGES[damage]
    change(data)
    group.write_text(json.dumps(data))
    return tuple(words)


@pytest.mark.parametrize("damage", ["not json", '{"asked": 0}', "missing", "asked 2**70", "no prompt", "a completion fewer"])
def test_a_damaged_group_file_is_one_line_naming_it(run, damage):
    words = damage_group(run, damage)
    one_line(resume(run), "00000001.json", "start a new run", *words)


@pytest.mark.parametrize("damage", ["missing", *GROUP_DAMAGES])
def test_a_group_file_that_is_not_the_runs_is_refused_naming_it(run, damage):
    from training.online_files import Group

    words = damage_group(run, damage)
    with pytest.raises(UserError) as refusal:
        Group.read(run / "online", 1, vocabulary=100, d=3, completions=4)
    line = str(refusal.value)
    assert "00000001.json" in line and "start a new run" in line and all(w in line for w in words), line
    assert "\x1b" not in line and "\n" not in line


@pytest.mark.parametrize("kind, damage", [
    ("groups", lambda g: g["completions"].pop()), ("groups", lambda g: g.update(asked=2**70)),
    ("outcomes", lambda o: o["kinds"].pop()),
], ids=["a completion fewer", "asked 2**70", "an outcome slot fewer"])
def test_a_damaged_file_a_later_step_trains_on_is_refused_before_any_training(run, kind, damage):
    """The resume would take step 2 (iteration 1) before it reads iteration 2's files: it is
    refused before that step, with the state, the metrics and the journal as they were."""
    path = run / "online" / kind / "00000002.json"
    data = json.loads(path.read_text())
    damage(data)
    path.write_text(json.dumps(data))
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != "run.lock"}
    one_line(resume(run), f"{kind}/00000002.json", "start a new run")
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != "run.lock"} == before


def test_a_partial_last_metrics_line_is_left_out_by_show_and_report(run):
    metrics = run / "online" / "metrics.jsonl"
    metrics.write_text(metrics.read_text() + '{"step": 2, "scal')  # a kill in the middle of an append
    shown = summary(run)["training"]
    assert shown["steps"] == 1 and len(shown["curve"]) == 1
    assert "1 steps" in report.write(run).read_text()
    done = evo("show", str(run))
    assert done.returncode == 0 and "training (grpo, every 1 iterations): 1 steps" in done.stdout, done.stderr
    metrics.write_text('{"step": 1, "scalar": "<img src=x onerror=alert(1)>"}\n')  # a complete line, tampered
    with pytest.raises(UserError, match="metrics.jsonl: line 1"):
        summary(run)


def test_a_full_disk_during_a_state_save_is_one_line_and_a_later_resume_is_identical(run, whole):
    before = (run / "online" / "state.pt").read_bytes()
    (run / "online" / "state.pt.tmp").symlink_to("/dev/full")  # every write there fails with ENOSPC
    one_line(resume(run), "cannot save the training state", "No space left on device", "--resume")
    assert (run / "online" / "state.pt").read_bytes() == before and not (run / "online" / "state.pt.tmp").exists()
    done = resume(run)
    assert done.returncode == 0, done.stderr
    mine, reference = weights(run), weights(whole)
    assert all(torch.equal(mine[k], reference[k]) for k in reference)
    steps = [json.loads(line)["step"] for line in (run / "online" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="a read-only bind mount needs root")
def test_a_read_only_run_directory_is_one_line(run):
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    script = (f"mount --bind {run} {run} && mount -o remount,ro,bind {run} && "
              f"{sys.executable} -m evo run --resume {run} --iterations 5 --quiet")
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          capture_output=True, text=True, timeout=300)
    one_line(done, str(run))
    assert "Read-only file system" in done.stderr
    assert {p: p.read_bytes() for p in before} == before


def test_a_checkpoint_of_another_size_is_one_line(run, tmp_path):
    other = tmp_path / "micro"
    tok = tiny.char_tokenizer()
    tiny.save(tiny.new_model("micro", "llama", tok, context=2048), tok, other)
    before = (run / "online" / "state.pt").read_bytes()
    one_line(evo("run", "--resume", str(run), "--policy", f"local:{other}", "--quiet"), "the run trains", "start a new run")
    settings = json.loads((run / "online" / "settings.json").read_text())  # told that the checkpoint moved
    (run / "online" / "settings.json").write_text(json.dumps({**settings, "checkpoint": str(other.resolve())}))
    one_line(evo("run", "--resume", str(run), "--policy", f"local:{other}", "--quiet"), "state.pt", "does not fit")
    assert (run / "online" / "state.pt").read_bytes() == before


@pytest.mark.parametrize("option, message", [
    ("lr=abc", "lr must be a number"), ("lr=nan", "lr must be a number"), ("lr=-1", "lr must be a finite number > 0"),
    ("kl_coef=nan", "kl_coef must be a number"), ("eps_low=-1", "eps_low must be a finite number >= 0"),
    ("learning_rate=0.1", "neither a training setting"), ("max_new_tokens=0", "max_new_tokens must be >= 1"),
    ("K=abc", "K must be an integer >= 1"), ("K=0", "K must be an integer >= 1"), ("alpha=-1", "alpha must be a finite number > 0"),
])
def test_every_training_option_is_checked_before_any_work_in_run_and_compare(init_dir, tmp_path, capsys, option, message):
    out = tmp_path / "x"
    algo = "grpo" if option.split("=")[0] in ("lr", "kl_coef", "eps_low", "learning_rate", "max_new_tokens") else "vpo_front"
    line = refused(capsys, "run", SPEC, "--policy", f"local:{init_dir}", "--train", algo, "--train-option", option,
                   "--iterations", "2", "--out", str(out))  # (a short run where one was accepted)
    assert message in line and not out.exists()
    line = refused(capsys, "compare", "--spec", SPEC, "--policy", f"a=local:{init_dir}", "--train", f"a={algo}",
                   "--train-option", option, "--seeds", "2", "--out", str(out))  # (refused before any run)
    assert message in line and not out.exists()


def test_maxk_k_above_the_completions_per_prompt_is_refused_before_any_work(init_dir, tmp_path, capsys):
    out = tmp_path / "x"  # nguyen7 asks 4 completions per prompt
    line = refused(capsys, "run", SPEC, "--policy", f"local:{init_dir}", "--train", "maxk", "--train-option", "k=5",
                   "--iterations", "2", "--out", str(out))
    assert "k must be <= G" in line and not out.exists()


def test_a_step_whose_loss_is_not_finite_is_not_applied(init_dir):
    from training.config import TrainConfig
    from training.engines import as_rollout
    from training.rollouts import Rollouts
    from training.trainer import State, update
    from evo.policies.base import Completion

    model, tok = tiny.AutoModelForCausalLM.from_pretrained(init_dir), tiny.char_tokenizer()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    row = [Completion("ab", (5, 6), finish_reason="stop"), Completion("c", (7,), finish_reason="stop")]
    samples = as_rollout([[4, 5]], [row], tok.pad_token_id)
    rolls = Rollouts([], samples, ["ab", "c"], np.zeros((1, 2, 1, 1)), np.zeros((1, 2), bool), np.zeros((1, 2), bool),
                     np.zeros((1, 2), int))
    config = TrainConfig(task="online", algo="grpo", init=str(init_dir), out="-", max_new_tokens=64)
    state = State(config, None, model, tok, optimizer, None, 0)
    with pytest.raises(UserError, match="non-finite"):
        update(state, rolls, np.array([[np.nan, 1.0]]))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert not optimizer.state  # AdamW never stepped
