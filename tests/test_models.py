"""Any Hugging Face causal LM as --init: tiny random Qwen2/Qwen3/Llama/Mistral/GPT-2 models with
a word-level tokenizer that carries a chat template, built here (nothing downloaded)."""

from __future__ import annotations

import json
import math

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
from transformers import (GPT2Config, LlamaConfig, MistralConfig, PreTrainedTokenizerFast, Qwen2Config,
                          Qwen3Config, AutoModelForCausalLM)

from evo.errors import UserError
from evo.policies import load
from evo.policies.prompt_format import PromptFormat
from tests.toytask import CharMix
from training import models as train_models
from training.config import TrainConfig
from training.trainer import rollout, run, setup

torch.set_num_threads(1)

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>", "<user>", "<assistant>"]
WORDS = [f"mix{i}:" for i in range(7)] + ["a", "b", "ab", "1", "2", "12", "a1"]
TEMPLATE = ("{% for m in messages %}<user> {{ m['content'] }} {% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}")


def word_tokenizer(chat: bool = True) -> PreTrainedTokenizerFast:
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(SPECIALS + WORDS)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                  unk_token="<unk>", padding_side="left")
    if chat:
        tok.chat_template = TEMPLATE
    return tok


def tiny_config(arch: str, vocab: int):
    ids = dict(vocab_size=vocab, pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=True)
    llama_like = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=64, **ids)
    if arch == "gpt2":
        return GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **ids)
    return {"llama": LlamaConfig, "qwen2": Qwen2Config, "qwen3": Qwen3Config, "mistral": MistralConfig}[arch](
        **llama_like, **({"head_dim": 16} if arch == "qwen3" else {}))


def make_init(path, arch: str, chat: bool = True):
    tok = word_tokenizer(chat)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_config(arch, len(tok)))  # near-uniform: varied samples, some end early
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def config(init, out, **overrides) -> TrainConfig:
    base = dict(task="charmix", algo="grpo", init=str(init), out=str(out), steps=2, prompts=2, group=6,
                max_new_tokens=8, lr=1e-3, seed=0, device="cpu")
    return TrainConfig(**{**base, **overrides})


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "mistral", "gpt2"])
def test_any_causal_lm_trains_with_its_chat_template(arch, tmp_path):
    init = make_init(tmp_path / "init", arch)
    state = setup(config(init, tmp_path / "probe"), False, CharMix())
    rolls, _ = rollout(state)
    user, assistant = state.tokenizer.convert_tokens_to_ids(["<user>", "<assistant>"])
    first = rolls.samples.prompt_ids[0][rolls.samples.prompt_mask[0].bool()].tolist()
    assert first[0] == user and first[-1] == assistant  # the template wraps every prompt
    records = run(config(init, tmp_path / "out"), task=CharMix(), progress=False)
    assert len(records) == 2 and all(v is None or math.isfinite(v) for r in records for v in r.values())
    assert json.loads((tmp_path / "out" / "config.json").read_text())["model_type"] == arch
    assert load(f"local:{tmp_path / 'out'}").generate(["mix1:"], n=2, max_new_tokens=4, seed=0)[0][0].token_ids


def test_chat_flag_switches_the_template_and_refuses_a_missing_one(tmp_path):
    tok = word_tokenizer()
    plain = PromptFormat.chosen(tok, None, chat=False).encode(tok, ["mix1:"])[0]
    chat = PromptFormat.chosen(tok, None).encode(tok, ["mix1:"])[0]
    assert chat == tok.convert_tokens_to_ids(["<user>", "mix1:", "<assistant>"]) and plain != chat
    with pytest.raises(UserError, match="--no-chat"):
        PromptFormat.chosen(word_tokenizer(chat=False), None, chat=True)


def test_gradient_checkpointing_gives_the_same_step(tmp_path):
    init = make_init(tmp_path / "init", "qwen2")
    plain = run(config(init, tmp_path / "a", steps=1, entropy_coef=0.01), task=CharMix(), progress=False)[0]
    checkpointed = run(config(init, tmp_path / "b", steps=1, gradient_checkpointing=True, entropy_coef=0.01),
                       task=CharMix(), progress=False)[0]
    assert plain["grad_norm"] > 0
    for key in ("loss", "grad_norm", "entropy", "scalar"):
        assert checkpointed[key] == pytest.approx(plain[key], rel=1e-4, abs=1e-6), key


def test_lora_trains_adapters_and_saves_merged_weights(tmp_path):
    pytest.importorskip("peft")
    init = make_init(tmp_path / "init", "llama")
    state = setup(config(init, tmp_path / "probe", lora_rank=4), False, CharMix())
    trained = [n for n, p in state.model.named_parameters() if p.requires_grad]
    assert trained and all("lora_" in n for n in trained)
    run(config(init, tmp_path / "out", lora_rank=4, lr=1e-2), task=CharMix(), progress=False)
    assert not (tmp_path / "out" / "adapter_config.json").exists()
    before = AutoModelForCausalLM.from_pretrained(init).state_dict()
    after = AutoModelForCausalLM.from_pretrained(tmp_path / "out").state_dict()
    assert set(before) == set(after)
    assert torch.equal(before["model.embed_tokens.weight"], after["model.embed_tokens.weight"])
    assert not torch.equal(before["model.layers.0.self_attn.q_proj.weight"], after["model.layers.0.self_attn.q_proj.weight"])
    with pytest.raises(UserError, match="LoRA run cannot be resumed"):
        setup(config(init, tmp_path / "out", lora_rank=4), True, CharMix())


def test_device_choice(tmp_path):
    assert train_models.resolve_device("cpu") == "cpu"
    assert train_models.resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="no GPU"):
            train_models.resolve_device("cuda")
    with pytest.raises(UserError, match="unknown device"):
        train_models.resolve_device("tpu")


def test_lora_weights_merge_layer_by_layer_as_peft_merges_a_copy():
    """What a weight push sends (merged_weights) equals peft's merge_and_unload of a deep copy."""
    pytest.importorskip("peft")
    import torch

    from training import models, tiny

    tok = tiny.char_tokenizer()
    model = models.with_lora(tiny.new_model("nano", "qwen2", tok, context=64, seed=0), 4, 8.0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_()  # zero at init: the delta must be non-zero to be tested
    want = models.merged(model).state_dict()
    got = dict(models.merged_weights(model))
    assert sorted(got) == sorted(want)
    for name, tensor in want.items():
        torch.testing.assert_close(got[name], tensor, rtol=0, atol=0)
    base = model.get_base_model().model.layers[0].self_attn.q_proj.base_layer.weight
    assert not torch.equal(got["model.layers.0.self_attn.q_proj.weight"], base)  # the adapter's delta is in
