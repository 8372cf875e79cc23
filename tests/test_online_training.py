"""`evo run --train`: the search trains its own local policy; a SIGKILLed run resumes to the
same programs and weights as an uninterrupted one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from evo import report
from evo.report.summary import summary
from evo.database import Database
from tests.evo_cli import refused
from training import tiny
from training.trainer import MEASURED

pytestmark = pytest.mark.slow
SPEC = "examples/nguyen7/problem.toml"
ITERATIONS = 6


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("init")
    tok = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tok, context=2048, seed=3), tok, path)
    return path


def command(init_dir, out) -> list[str]:
    return [sys.executable, "-m", "evo", "run", SPEC, "--policy", f"local:{init_dir}", "--train", "grpo",
            "--train-every", "2", "--train-option", "entropy_coef=0.05", "--train-option", "lr=0.01", "--train-option", "kl_coef=0.1",
            "--iterations", str(ITERATIONS), "--batch", "1", "--depth", "1", "--set", "prompt.style=continue",
            "--max-new-tokens", "12", "--seed", "5", "--quiet", "--out", str(out)]


def outcome(out) -> tuple[list, dict, list]:
    with Database.open(out) as db:
        proposals = [(c.iteration, c.slot, c.code, c.status) for c in db.journal.candidates(since=0)]
    weights = torch.load(out / "online" / "state.pt", weights_only=False)["model"]
    metrics = [{k: v for k, v in json.loads(line).items() if not k.startswith("seconds") and k not in MEASURED}
               for line in (out / "online" / "metrics.jsonl").read_text().splitlines()]
    return proposals, weights, metrics


def kill_after_first_step_and_resume(cmd: list[str], out, timeout: float = 300) -> None:
    """Run `cmd` (an `evo run --train ... --out OUT`), SIGKILL it once its first step is saved,
    check that it was cut mid-run, and continue it with `evo run --resume OUT`."""
    killed = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while not (out / "online" / "state.pt").exists() and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    with Database.open(out) as db:
        assert db.iteration < ITERATIONS  # killed mid-run
    resumed = subprocess.run([sys.executable, "-m", "evo", "run", "--resume", str(out), "--quiet"],
                             capture_output=True, text=True, timeout=timeout)
    assert resumed.returncode == 0, resumed.stderr[-3000:]


def test_a_run_too_short_to_train_says_so_when_it_ends(init_dir, tmp_path):
    """Step 1 waits for --train-every iterations scored, the lag behind the asks: a shorter run
    ends with one warning line (before, only `evo show` told, as "0 steps")."""
    cmd = command(init_dir, tmp_path / "short")
    cmd[cmd.index("--iterations") + 1], cmd[cmd.index("--train-every") + 1] = "3", "3"
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("warning:")]
    assert "--train took no training step" in line and "iterations 0-2" in line and "before iteration 4" in line
    resumed = subprocess.run([sys.executable, "-m", "evo", "run", "--resume", str(tmp_path / "short"), "--iterations", "6",
                              "--quiet"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0 and "warning:" not in resumed.stderr, resumed.stderr[-3000:]


def test_a_killed_run_resumes_to_the_same_programs_and_weights(init_dir, tmp_path):
    whole = subprocess.run(command(init_dir, tmp_path / "whole"), capture_output=True, text=True, timeout=300)
    assert whole.returncode == 0, whole.stderr
    kill_after_first_step_and_resume(command(init_dir, tmp_path / "killed"), tmp_path / "killed")
    proposals, weights, metrics = outcome(tmp_path / "whole")
    again, weights_again, metrics_again = outcome(tmp_path / "killed")
    assert len(proposals) == ITERATIONS * 4 and proposals == again
    assert [m["step"] for m in metrics] == [1, 2] and metrics == metrics_again  # steps before groups 3 and 5 (lag 1)
    assert metrics[0]["kl"] == 0.0 < metrics[1]["kl"]  # step 1 starts from the init weights, step 2 has moved
    assert all(torch.equal(weights[k], weights_again[k]) for k in weights)
    initial = tiny.AutoModelForCausalLM.from_pretrained(init_dir).state_dict()
    assert any(not torch.equal(initial[k], weights[k]) for k in weights)  # the steps moved the weights
    shown = summary(tmp_path / "whole")["training"]  # evo show --json
    assert shown["steps"] == 2 and shown["algo"] == "grpo" and shown["seconds"] > 0 and len(shown["curve"]) == 2
    page = report.write(tmp_path / "whole").read_text()
    assert "Training during the search" in page and "2 steps" in page


def test_train_flags_refuse_what_they_cannot_do(tmp_path, capsys):
    out = ["--out", str(tmp_path / "x")]
    assert "--train ALGO" in refused(capsys, "run", SPEC, "--policy", "mutate:", "--train-every", "2", *out)
    assert "shows no weighting" in refused(capsys, "run", SPEC, "--policy", "mutate:", "--train", "goal_grpo", *out)
    assert "local:PATH" in refused(capsys, "run", SPEC, "--policy", "mutate:", "--train", "grpo", *out)
    assert "one program per reply" in refused(capsys, "run", SPEC, "--policy", "local:maze-clusters-vpo", "--train", "grpo",
                                              "--answers", "3", *out)
    assert "scores a set" in refused(capsys, "run", SPEC, "--policy", "local:maze-clusters-warmup", "--train", "vpo", *out)
    for rule in ("failures", "duplicates"):  # a zero vector beats every program on a minimized objective
        assert f"{rule}=zero" in refused(capsys, "run", SPEC, "--policy", "local:symreg-warmup", "--train", "grpo",
                                         "--train-option", f"{rule}=zero", "--set", 'problem.minimize=["r0"]', *out)
    assert not (tmp_path / "x").exists()  # refused before the run directory is made


def test_compare_spec_trains_a_named_policy_afresh_in_each_run(init_dir, tmp_path):
    out = tmp_path / "cmp"
    args = [sys.executable, "-m", "evo", "compare", "--spec", SPEC, "--policy", f"frozen=local:{init_dir}",
            "--policy", f"online=local:{init_dir}", "--train", "online=grpo", "--train-every", "1", "--seeds", "2",
            "--programs", "8", "--set", "prompt.style=continue", "--set", "sandbox.workers=1", "--out", str(out), "--json", "--quiet"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["policies"]["online"]["train"]["algo"] == "grpo" and "train" not in result["policies"]["frozen"]
    for seed in (0, 1):
        assert len(list((out / "search" / "online" / f"s{seed}" / "online" / "groups").iterdir())) == 2  # its proposals were recorded
        assert not (out / "search" / "frozen" / f"s{seed}" / "online").exists()


def test_compare_spec_train_refuses_a_policy_it_cannot_train(tmp_path, capsys):
    args = ["compare", "--spec", SPEC, "--policy", "a=mutate:", "--out", str(tmp_path / "x")]
    assert "local:PATH" in refused(capsys, *args, "--train", "a=grpo")
    assert "no --policy named 'b'" in refused(capsys, *args, "--train", "b=grpo")
    # the programs per reply --answers asks for are checked too, before any search run starts
    sets = ["compare", "--spec", SPEC, "--policy", "b=local:symreg-warmup", "--out", str(tmp_path / "y")]
    assert "one program per reply" in refused(capsys, *sets, "--train", "b=grpo", "--answers", "b=3")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


@pytest.fixture(scope="module")
def bf16_dir(tmp_path_factory):
    """A tiny Llama stored in bfloat16, as real checkpoints are."""
    path = tmp_path_factory.mktemp("bf16")
    tok = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tok, context=2048, seed=3).to(torch.bfloat16), tok, path)
    assert json.loads((path / "config.json").read_text())["dtype"] == "bfloat16"
    return path


def test_a_bf16_model_trained_online_at_lr_1e_6_moves_every_weight_tensor(bf16_dir, tmp_path, monkeypatch):
    """`evo run --train` with a `local:` policy whose sampling model is bf16 (what it loads a bf16
    checkpoint in on CUDA; here on the CPU): the learner trains float32 masters, and after one
    step at lr 1e-6 every weight tensor has moved (pure bf16 AdamW moved 1.8% of projection
    elements and no norm gain: issue 44)."""
    from evo.cli import main
    from evo.policies.local import LocalPolicy

    monkeypatch.setattr(LocalPolicy.__init__, "__defaults__", ("cpu", torch.bfloat16))  # device, dtype
    out = tmp_path / "run"
    try:
        main(["run", SPEC, "--policy", f"local:{bf16_dir}", "--train", "grpo", "--train-every", "1",
              "--train-option", "lr=1e-6", "--train-option", "entropy_coef=0.05", "--iterations", "3", "--batch", "1",
              "--depth", "1", "--set", "prompt.style=continue", "--set", "sandbox.workers=1", "--max-new-tokens", "12",
              "--seed", "5", "--threads", "1", "--quiet", "--out", str(out)])
    except SystemExit as stop:
        assert stop.code in (0, None)
    state = torch.load(out / "online" / "state.pt", weights_only=True)
    assert state["step"] == 1
    initial = tiny.AutoModelForCausalLM.from_pretrained(bf16_dir, dtype=torch.float32).state_dict()
    masters = state["model"]
    assert {t.dtype for t in masters.values()} == {torch.float32}
    still = [name for name, tensor in masters.items() if torch.equal(tensor, initial[name])]
    assert not still and len(masters) == len(initial), still  # 100% of the weight tensors changed


def test_the_masters_of_a_bf16_sampling_model_are_pushed_into_it(bf16_dir):
    """A `local:` policy sampling in bf16: the learner's model is a float32 copy beside it, and
    `push` copies the trained weights in, rounded to bf16."""
    from evo.policies.local import LocalPolicy
    from training.online import trained_model

    policy = LocalPolicy(bf16_dir, device="cpu", dtype=torch.bfloat16)
    masters, _, plan = trained_model(policy)
    assert masters is not policy.sampler.model and plan.weights == torch.float32
    assert {p.dtype for p in masters.parameters()} == {torch.float32}
    with torch.no_grad():
        for p in masters.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    policy.push(masters)
    sampled = policy.sampler.model.state_dict()
    assert all(torch.equal(sampled[name], tensor.to(torch.bfloat16)) for name, tensor in masters.state_dict().items())
    fp32 = LocalPolicy(bf16_dir, device="cpu")  # the CPU's default: float32, trained in place
    assert trained_model(fp32)[0] is fp32.sampler.model


def test_a_resume_that_changes_the_groups_shape_or_the_checkpoint_is_one_line(init_dir, tmp_path, capsys):
    out = tmp_path / "run"
    first = command(init_dir, out)
    first[first.index("--iterations") + 1] = "2"
    done = subprocess.run(first, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    settings = json.loads((out / "online" / "settings.json").read_text())
    assert (settings["group"], settings["answers"], settings["checkpoint"]) == (4, 1, str(init_dir.resolve()))
    again = ("run", "--resume", str(out), "--iterations", "4", "--quiet")
    for flags, now in ((("--answers-by", "samples", "--answers", "2"), "8 of 1"), (("--samples-per-prompt", "2"), "2 of 1")):
        line = refused(capsys, *again, *flags).strip().splitlines()[-1]  # after the model's loading bar
        assert f"trained on 4 completions of 1 program(s) per prompt, and this resume asks {now}" in line
    other = tmp_path / "other"
    tok = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tok, context=2048, seed=4), tok, other)
    line = refused(capsys, *again, "--policy", f"local:{other}").strip().splitlines()[-1]
    assert f"trains {init_dir.resolve()}, not {other.resolve()}" in line
    with Database.open(out) as db:
        assert db.iteration == 2  # nothing ran
