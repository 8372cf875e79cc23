"""`openai:URL#MODEL;train=PATH` against a real HTTP server that plays `vllm serve`'s development
endpoints (tests/openai_server.py): the checks before any work, the push's requests and chunks,
prompts sent as token ids. tests/test_online_served.py runs it against a real `vllm serve`."""

from __future__ import annotations

import pytest
import torch

from evo import policies
from evo.errors import UserError, WorkFailed
from evo.policies import served
from evo.policies.vllm_transfer import unpack
from tests.openai_server import server  # noqa: F401 -- the fixture
from training import tiny

INFO = {"vllm_config": {"weight_transfer_config": {"backend": "evo_memory"}, "model_config": {"dtype": "torch.bfloat16"}}}
PUSH = ["/pause?mode=wait", "/start_weight_update", "/finish_weight_update", "/reset_prefix_cache", "/resume"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt")
    tok = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tok, seed=0), tok, path)
    return path


def dev_server(server, info=INFO):  # noqa: F811
    fake = server()
    fake.routes = {"/server_info": info, "/is_paused": {"is_paused": False}, "/init_weight_transfer_engine": {"message": "ok"},
                   **{path.partition("?")[0]: {"message": "ok"} for path in PUSH}, "/update_weights": {"message": "ok"}}
    return fake


def test_train_makes_an_openai_policy_trainable_and_is_checked(checkpoint, tmp_path) -> None:
    assert policies.trainable(f"openai:http://h:1#m;train={checkpoint}")
    assert not policies.trainable("openai:http://h:1#m")
    assert policies.checkpoint_of(f"openai:http://h:1#m;chat;train={checkpoint}") == str(checkpoint)
    with pytest.raises(UserError, match="unknown option 'train='"):
        policies.trainable("openai:http://h:1#m;train=")
    with pytest.raises(UserError, match="drop ;chat"):
        served.ServedPolicy(policies.openai.parse_uri(f"http://h:1#m;chat;train={checkpoint}"))
    with pytest.raises(UserError, match="no model directory"):
        served.ServedPolicy(policies.openai.parse_uri(f"http://h:1#m;train={tmp_path / 'none'}"))


def test_a_server_without_the_update_endpoints_or_backend_is_refused_in_one_line(server, checkpoint) -> None:  # noqa: F811
    plain = server()
    plain.routes = {"/server_info": 404}
    with pytest.raises(UserError, match="does not expose vLLM's weight-update endpoints .*VLLM_SERVER_DEV_MODE=1") as error:
        policies.load(f"openai:{plain.url}#tiny;train={checkpoint}")
    assert "\n" not in str(error.value)
    nccl = dev_server(server, {"vllm_config": {"weight_transfer_config": {"backend": "nccl"}}})
    with pytest.raises(UserError, match="no 'evo_memory' weight-transfer backend \\(it has nccl\\)"):
        policies.load(f"openai:{nccl.url}#tiny;train={checkpoint}")
    assert nccl.paths == ["/server_info?config_format=json"]  # nothing started on a server it refused


def test_a_push_sends_every_tensor_once_in_chunks_in_the_servers_dtype(server, checkpoint, monkeypatch) -> None:  # noqa: F811
    fake = dev_server(server)
    policy = policies.load(f"openai:{fake.url}#tiny;train={checkpoint}")
    assert fake.paths == ["/server_info?config_format=json", "/is_paused", "/init_weight_transfer_engine"]
    monkeypatch.setattr(served, "CHUNK_BYTES", 100_000)
    model, _ = policy.trainee()  # pushed at once: the server samples what the trainer holds
    state = model.state_dict()
    pushed = fake.paths[3:]
    updates = [body["update_info"]["weights"] for path, body in zip(pushed, fake.routed[3:]) if path == "/update_weights"]
    assert [p for p in pushed if p != "/update_weights"] == PUSH and pushed[2:2 + len(updates)] == ["/update_weights"] * len(updates)
    chunks = [unpack(chunk) for chunk in updates]
    assert len(chunks) > 2 and all(sum(t.numel() * 2 for t in c.values()) <= 100_000 or len(c) == 1 for c in chunks)
    names = [name for c in chunks for name in c]
    assert sorted(names) == sorted(state) and len(set(names)) == len(names)
    for c in chunks:
        for name, tensor in c.items():
            assert tensor.dtype == torch.bfloat16 and torch.equal(tensor, state[name].to(torch.bfloat16))


def test_prompts_go_as_the_checkpoints_token_ids_and_ids_come_back(server, checkpoint) -> None:  # noqa: F811
    fake = dev_server(server)
    policy = policies.load(f"openai:{fake.url}#tiny;train={checkpoint}")
    policy.generate(["def f(x):", "ab"], n=2, max_new_tokens=4)
    assert sorted(body["prompt"] for body in fake.bodies) == sorted(policy.encode(["def f(x):", "ab"]))  # requests run concurrently
    assert all(body["return_token_ids"] for body in fake.bodies)
    # nothing of the checkpoint's generation_config.json (top_k, penalties) reshapes what the learner trains on
    assert all(body["top_k"] == 0 and body["repetition_penalty"] == 1.0 and body["min_p"] == 0.0 for body in fake.bodies)


def test_a_server_that_ignores_return_token_ids_is_refused_at_its_first_sample_in_one_line(server, checkpoint) -> None:  # noqa: F811
    fake = dev_server(server)
    policy = policies.load(f"openai:{fake.url}#tiny;train={checkpoint}")
    assert all(c.token_ids for group in policy.generate(["ab"], n=2, max_new_tokens=4) for c in group)
    fake.token_ids = False
    with pytest.raises(UserError, match="without their token ids: it ignores `return_token_ids`") as error:
        policy.generate(["ab"], n=2, max_new_tokens=4)
    assert "\n" not in str(error.value)


def test_a_failed_update_is_one_line_and_the_server_resumes(server, checkpoint) -> None:  # noqa: F811
    fake = dev_server(server)
    policy = policies.load(f"openai:{fake.url}#tiny;train={checkpoint}")
    fake.routes["/update_weights"] = 500
    with pytest.raises(WorkFailed, match="could not load weights .*HTTP 500.*evo run --resume") as error:
        policy.push(tiny.new_model("nano", "llama", tiny.char_tokenizer(), seed=0))
    assert "\n" not in str(error.value) and fake.paths[-1] == "/resume"


@pytest.mark.parametrize("open_update", [True, False])
def test_a_server_left_paused_by_a_killed_push_is_closed_and_resumed_in_one_line(server, checkpoint, capsys, open_update) -> None:  # noqa: F811
    fake = dev_server(server)
    fake.routes["/is_paused"] = {"is_paused": True}
    if not open_update:  # killed before /start_weight_update or after /finish_weight_update: vLLM refuses the finish
        fake.routes["/finish_weight_update"] = 500
    policies.load(f"openai:{fake.url}#tiny;train={checkpoint}")
    assert fake.paths[1:] == ["/is_paused", "/finish_weight_update", "/resume", "/init_weight_transfer_engine"]
    warning = capsys.readouterr().err.strip()
    assert warning.startswith("warning: openai:") and "was paused" in warning and "\n" not in warning


def test_vllms_rotary_reload_note_is_dropped_and_a_real_missed_layer_is_not(caplog) -> None:
    """vLLM logs "RotaryEmbedding: Failed to load weights" at every push (a computed cos/sin cache
    no checkpoint holds); importing the worker side drops that line only."""
    import logging

    from evo.policies.vllm_transfer import RELOAD_LOGGER

    logger = logging.getLogger(RELOAD_LOGGER)
    with caplog.at_level(logging.WARNING, logger=RELOAD_LOGGER):
        logger.warning("%s: Failed to load weights", "RotaryEmbedding")
        logger.warning("%s: Failed to load weights", "Llama3RotaryEmbedding")
        logger.warning("%s: Failed to load weights", "QKVParallelLinear")
    assert [r.getMessage() for r in caplog.records] == ["QKVParallelLinear: Failed to load weights"]
