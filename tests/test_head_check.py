"""A head the loss does not know by name is checked once against the model's own logits:
a model whose logits are not `lm_head(hidden)` (Falcon-H1's lm_head_multiplier) trains on its
own forward's log-probs, with a one-line warning, instead of silently wrong ones."""

from __future__ import annotations

import pytest
import torch
from transformers import FalconH1Config, Qwen2Config, Qwen2ForCausalLM

from evo.policies.sampler import Sampler
from tests.test_loss import joint_logprobs
from training import loss, tiny

torch.set_num_threads(1)


class MultipliedQwen2(Qwen2ForCausalLM):
    """A Qwen2 whose forward scales its logits by `config.lm_head_multiplier`, as Falcon-H1's does."""

    def forward(self, *args, **kwargs):
        out = super().forward(*args, **kwargs)
        out.logits = out.logits * self.config.lm_head_multiplier
        return out


def multiplied_qwen2(tok, multiplier: float = 0.25) -> MultipliedQwen2:
    config = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                         tie_word_embeddings=False, pad_token_id=tiny.PAD_ID, eos_token_id=tiny.EOS_ID,
                         initializer_range=0.5)  # logits with some spread, so a multiplier matters
    config.lm_head_multiplier = multiplier
    torch.manual_seed(0)
    return MultipliedQwen2(config).eval()


def test_a_logit_multiplier_falls_back_to_the_models_own_log_probs_and_gradients(capsys):
    tok = tiny.char_tokenizer()
    model = multiplied_qwen2(tok)
    samples = Sampler(model, tok).sample(["ab", "xyz=1"], n=3, max_new_tokens=6, temperature=1.0, seed=3)
    rows, mask = torch.arange(6), samples.completion_mask.float()
    ours = loss.token_logprobs(model, samples, rows)[0]
    warned = capsys.readouterr().err
    assert warned.count("\n") == 1 and "MultipliedQwen2's logits are not its LM head" in warned
    (ours * mask).sum().backward()
    got = model.lm_head.weight.grad.clone()
    model.zero_grad()
    want = joint_logprobs(model, samples, rows)
    assert float(((want.detach() - ours.detach()).abs() * mask).max()) < 1e-5
    (want * mask).sum().backward()
    torch.testing.assert_close(got, model.lm_head.weight.grad, atol=1e-5, rtol=1e-4)
    loss.token_logprobs(model, samples, rows)
    assert capsys.readouterr().err == ""  # checked once per model


def test_a_plain_head_is_split_without_a_word(capsys):
    tok = tiny.char_tokenizer()
    model = multiplied_qwen2(tok, multiplier=1.0)
    assert loss.head_parts(model) is not None and capsys.readouterr().err == ""


def test_falcon_h1s_head_multiplier_is_caught():
    from transformers import AutoModelForCausalLM

    config = FalconH1Config(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                            num_attention_heads=2, num_key_value_heads=1, mamba_d_ssm=32, mamba_n_heads=4,
                            mamba_d_head=8, mamba_d_state=8, mamba_chunk_size=8, max_position_embeddings=64,
                            lm_head_multiplier=0.25)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    assert loss.head_parts(model) is None


@pytest.mark.parametrize("arch", ["llama", "gpt2"])
def test_the_shipped_layouts_still_split(arch):
    model = tiny.new_model("nano", arch, tiny.char_tokenizer(), context=64, seed=1)
    assert loss.head_parts(model) is not None
