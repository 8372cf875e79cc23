"""One prompt encoder: a checkpoint trained with a chat template (and a system text) is prompted
with the same token ids by the trainer, the supervised warm-up, `local:`, `vllm:`, the online
learner and TRL's dataset. The tokenizer is the project's character tokenizer with three role
tokens and a small jinja template (built here, nothing downloaded)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from evo.errors import UserError
from evo.loop import PromptGroup, Told
from evo.policies import load
from evo.policies.base import Completion
from evo.policies.prompt_format import PLAIN, PromptFormat
from tests.test_vllm import KV_BYTES, needs_vllm, vllm_env, VLLM_PY
from tests.toytask import CharMix
from training import sft, tiny
from training.config import TrainConfig
from training.trainer import run, setup

torch.set_num_threads(1)

ROLES = ["<system>", "<user>", "<assistant>"]
TEMPLATE = ("{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}")
SYSTEM = "Be brief."
TEXT = "mix3 x3:"


def chat_tokenizer():
    tok = tiny.char_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ROLES})
    tok.chat_template = TEMPLATE
    return tok


def expected_ids(tok, text: str = TEXT) -> list[int]:
    """<bos> <system> Be brief. <user> TEXT <assistant>, written out token by token."""
    chars = lambda text: tok.convert_tokens_to_ids(list(text))  # noqa: E731
    system, user, assistant = tok.convert_tokens_to_ids(ROLES)
    return [tiny.BOS_ID, system, *chars(SYSTEM), user, *chars(text), assistant]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A checkpoint trained one step by `evo train`'s trainer with the chat template and a system text."""
    root = tmp_path_factory.mktemp("prompt")
    tok = chat_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tok, context=256, seed=0), tok, root / "init")
    config = TrainConfig(task="charmix", algo="grpo", init=str(root / "init"), out=str(root / "out"), steps=1, prompts=2,
                         group=2, max_new_tokens=4, lr=1e-3, device="cpu", system=SYSTEM)
    run(config, task=CharMix(), progress=False)
    return root / "out"


def test_the_trained_checkpoint_records_its_prompt_format(trained):
    saved = json.loads((trained / "train_config.json").read_text())
    assert saved["prompt"] == {"chat": True, "system": SYSTEM} and saved["set_size"] == 1
    assert PromptFormat.recorded(trained) == PromptFormat(True, SYSTEM)


def test_training_sft_local_and_the_online_learner_encode_the_same_ids(trained, tmp_path):
    from training.online import Learner, OnlineSettings

    tok = chat_tokenizer()
    want = expected_ids(tok)
    state = setup(TrainConfig(task="charmix", algo="grpo", init=str(trained), out=str(tmp_path / "again"), steps=1,
                              max_new_tokens=4, device="cpu"), False, CharMix())
    assert state.encode([TEXT]) == [want]  # training from the checkpoint follows its record
    assert (state.config.chat, state.config.system) == (True, SYSTEM)

    policy = load(f"local:{trained}")
    assert policy.encode([TEXT]) == [want]
    assert policy.sampler.sample([TEXT], n=1, max_new_tokens=2, seed=0).prompt_ids[0].tolist() == want

    ids, prompt_len = sft.encode(tok, TEXT, "a|1|b", PromptFormat.of_checkpoint(trained, tok))
    assert ids[:prompt_len] == want

    learner = Learner(policy, tmp_path / "run", OnlineSettings.of("grpo", 1, {}), seed=0, lag=0,
                      objectives=CharMix.objectives, weights=CharMix.weights, group=1)
    group = PromptGroup(0, (SimpleNamespace(text=TEXT),), (0,), ((),), {})
    learner.told(Told(group, ((Completion("a", (70,)),),), (), np.zeros((0, 2))))
    recorded = json.loads((tmp_path / "run" / "online" / "groups" / "00000000.json").read_text())
    assert recorded["prompt"] == want


def test_pretrain_from_the_checkpoint_trains_and_records_its_format(trained, tmp_path):
    from training.pretrain import pretrain

    config = sft.SFTConfig(steps=1, batch_size=2, warmup=1, pool=4, threads=1)
    pretrain(CharMix(), "charmix", "nano", "llama", 256, config, tmp_path / "sft", 0, True, init=str(trained))
    assert PromptFormat.recorded(tmp_path / "sft") == PromptFormat(True, SYSTEM)
    tok, task = chat_tokenizer(), CharMix()
    pool = task.instances("train", 4)
    batch = sft.sample_batch(task, pool, tok, config, np.random.default_rng(0), PromptFormat.of_checkpoint(tmp_path / "sft", tok))
    heads = [expected_ids(tok, task.prompt(i, m)) for i in pool for m in (1, config.m)]
    assert batch and all(ids[:n] in heads for ids, n in batch)


def test_trls_dataset_tokenizes_to_the_same_ids(trained):
    pytest.importorskip("trl")
    from trl import GRPOTrainer

    from training.integrations import trl

    task, chat, plain = CharMix(), chat_tokenizer(), tiny.char_tokenizer()
    instances = task.instances("train", 3)
    for tok, init in ((chat, str(trained)), (plain, None)):
        prompt = trl.prompt_format(TrainConfig(task="charmix", algo="grpo", init=init or "none", out="unused"), tok)
        rows = [row["prompt"] for row in trl.dataset(task, instances, 1, prompt)]  # as GRPOTrainer batches them
        # GRPOTrainer's own tokenization of a batch of dataset prompts (TRL 1.16), on a stand-in trainer
        grpo = SimpleNamespace(processing_class=tok, _is_vlm=False, environment_factories=None, chat_template=None,
                               tools=None, chat_template_kwargs={})
        ids = GRPOTrainer._tokenize_prompts(grpo, rows)[0]
        assert [list(x) for x in ids] == prompt.encode(tok, [task.prompt(i, 1) for i in instances])
    assert ids[0][0] == tiny.BOS_ID and prompt == PLAIN
    assert trl.prompt_format(TrainConfig(task="charmix", algo="grpo", init=str(trained), out="unused"),
                             chat).encode(chat, [TEXT]) == [expected_ids(chat)]


def test_verls_rows_carry_the_recorded_system_message_and_refuse_a_plain_model(trained):
    from training.integrations import verl

    tok = chat_tokenizer()
    messages = verl.rows("maze", "vpo", count=1, init=str(trained))[0]["prompt"]
    assert messages[0] == {"role": "system", "content": SYSTEM} and messages[1]["role"] == "user"
    rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)  # as veRL's RLHFDataset
    assert tok(rendered, add_special_tokens=False).input_ids == PromptFormat(True, SYSTEM).encode(tok, [messages[1]["content"]])[0]
    assert verl.rows("maze", "vpo", count=1)[0]["prompt"][0]["role"] == "user"
    with pytest.raises(UserError, match="plain text"):
        verl.rows("maze", "vpo", count=1, init="maze-warmup")


def test_a_checkpoint_without_a_record_gets_the_training_default(tmp_path):
    plain = tiny.char_tokenizer()
    assert PromptFormat.chosen(plain, tmp_path) == PLAIN  # no template: plain text, `<bos>` first
    assert PLAIN.encode(plain, ["ab"]) == [[tiny.BOS_ID, *plain.convert_tokens_to_ids(["a", "b"])]]
    assert PromptFormat.chosen(chat_tokenizer(), tmp_path) == PromptFormat(chat=True)
    with pytest.raises(UserError, match="--no-chat"):
        PromptFormat.chosen(plain, tmp_path, chat=True)
    with pytest.raises(UserError, match="needs the chat template"):
        PromptFormat(chat=False, system="x")
    (tmp_path / "train_config.json").write_text(json.dumps({"set_size": 1, "prompt": {"chat": "yes"}}))
    with pytest.raises(UserError, match="bad \"prompt\" record"):
        PromptFormat.recorded(tmp_path)


VLLM_SCRIPT = """
import json, sys
if __name__ == "__main__":
    from evo.policies import load
    policy = load("vllm:" + sys.argv[1], dtype="float32", max_model_len=256, kv_cache_memory_bytes=int(sys.argv[2]),
                  enforce_eager=True)
    done = policy.generate([sys.argv[3]], n=1, max_new_tokens=2, temperature=1.0, seed=0)
    print("RESULT " + json.dumps({"ids": policy.encode([sys.argv[3]]), "sampled": len(done[0][0].token_ids)}))
"""


@needs_vllm
def test_vllm_encodes_the_same_ids(trained):
    cmd = [VLLM_PY, "-c", VLLM_SCRIPT, str(trained), KV_BYTES, TEXT]
    done = subprocess.run(cmd, capture_output=True, text=True, env=vllm_env(), timeout=600,
                          cwd=Path(__file__).resolve().parent.parent)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["ids"] == [expected_ids(chat_tokenizer())] and result["sampled"] >= 1
