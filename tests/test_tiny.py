"""The tiny-model toolkit: tokenizer round trips, sizes, and save/load through the Auto classes."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoModelForCausalLM, AutoTokenizer

from training import tiny

torch.set_num_threads(1)
TOK = tiny.char_tokenizer()


@settings(max_examples=50, deadline=None)
@given(st.text(alphabet=tiny.ALPHABET, max_size=80))
def test_round_trip_one_token_per_char(text: str) -> None:
    ids = TOK(text).input_ids
    assert ids[0] == tiny.BOS_ID and len(ids) == len(text) + 1
    assert TOK.decode(ids, skip_special_tokens=True) == text


def test_special_names_are_not_ascii_text() -> None:
    assert TOK("<pad><bos>").input_ids == [tiny.BOS_ID] + [TOK.convert_tokens_to_ids(c) for c in "<pad><bos>"]


def test_special_ids_and_unknown_chars() -> None:
    assert (TOK.pad_token_id, TOK.bos_token_id, TOK.eos_token_id, TOK.unk_token_id) == (0, 1, 2, 3)
    assert len(TOK) == 4 + 96
    assert TOK("a\tb€").input_ids == [tiny.BOS_ID, TOK.convert_tokens_to_ids("a"), tiny.UNK_ID,
                                      TOK.convert_tokens_to_ids("b"), tiny.UNK_ID]


def test_left_padding() -> None:
    batch = TOK(["a", "abc"], padding=True)
    assert batch.input_ids[0][:2] == [tiny.PAD_ID, tiny.PAD_ID]
    assert batch.attention_mask == [[0, 0, 1, 1], [1, 1, 1, 1]]


@pytest.mark.parametrize("arch", tiny.ARCHS)
@pytest.mark.parametrize("size,low,high", [("nano", 0.7e6, 1.3e6), ("nano8", 0.7e6, 1.3e6), ("micro", 3.5e6, 6e6)])
def test_sizes(arch: str, size: str, low: float, high: float) -> None:
    n = tiny.param_count(tiny.new_model(size, arch, TOK))
    assert low <= n <= high, n


def test_unknown_size_and_arch() -> None:
    with pytest.raises(ValueError, match="known: nano, nano8, micro"):
        tiny.config("huge")
    with pytest.raises(ValueError, match="llama, gpt2"):
        tiny.config("nano", "rnn")


def test_seeded_init_is_deterministic() -> None:
    a, b = tiny.new_model("nano", seed=3), tiny.new_model("nano", seed=3)
    c = tiny.new_model("nano", seed=4)
    wa, wb, wc = (m.get_input_embeddings().weight for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)


@pytest.mark.parametrize("arch", tiny.ARCHS)
def test_save_loads_with_auto_classes(tmp_path, arch: str) -> None:
    model = tiny.new_model("nano", arch, TOK, context=256)
    tiny.save(model, TOK, tmp_path)
    again = AutoModelForCausalLM.from_pretrained(tmp_path)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    assert (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, tok.padding_side) == (1, 2, 0, "left")
    x = tok(["def f(x):", "  return 1"], padding=True, return_tensors="pt")
    with torch.no_grad():
        real = x.attention_mask.bool()
        assert torch.allclose(model(**x).logits[real], again(**x).logits[real])
    assert (tmp_path / "model.safetensors").exists() and again.config.eos_token_id == tiny.EOS_ID
