"""The padding-free forward (training/packed.py) gives the log-probabilities, entropies and
gradients of the length-bucketed forward through the model's own layers, on ragged prompts
and completions; its layout, checked against a loop over rows."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from evo.policies.sampler import Sampler
from training import loss, packed, tiny

PROMPTS = ["ab", "a much longer prompt:", "xyz=1"]


def ragged(model, tok, lengths: list[int]):
    """Three prompts x 4 samples, their completion masks cut to `lengths` (the sampled tokens stay)."""
    samples = Sampler(model, tok).sample(PROMPTS, n=4, max_new_tokens=10, temperature=1.0, seed=3, ignore_eos=True)
    keep = torch.arange(samples.completion_ids.shape[1])[None, :] < torch.tensor(lengths)[:, None]
    return replace(samples, completion_mask=keep.long())


def logprobs_and_grads(model, samples, rows, weights):
    model.zero_grad()
    logp, entropy = loss.token_logprobs(model, samples, rows, entropy=True)
    mask = samples.completion_mask[rows].float()
    ((logp + 0.1 * entropy) * mask * weights[:, None]).sum().backward()
    return logp.detach() * mask, entropy.detach() * mask, [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("lengths", [[10, 1, 3, 7, 10, 2, 5, 9, 4, 10, 6, 8], [1] * 12])
def test_packed_forward_matches_the_bucketed_forward(arch, lengths, monkeypatch):
    tok = tiny.char_tokenizer()
    model = tiny.new_model("nano", arch, tok, context=256, seed=1)
    if arch == "qwen2":
        with torch.no_grad():  # q/k/v biases (zero at init) must enter the packed projections
            for layer in model.model.layers:
                for p in (layer.self_attn.q_proj.bias, layer.self_attn.k_proj.bias, layer.self_attn.v_proj.bias):
                    p.normal_(0.0, 0.5)
        assert model.config.num_key_value_heads < model.config.num_attention_heads
    assert packed.supports(model)
    samples = ragged(model, tok, lengths)
    weights = torch.linspace(-1.0, 1.0, 12)
    for rows in (torch.arange(12), torch.tensor([1, 2, 5, 10, 11])):
        got = logprobs_and_grads(model, samples, rows, weights[rows])
        with monkeypatch.context() as patch:
            patch.setattr(packed, "supports", lambda m: False)
            want = logprobs_and_grads(model, samples, rows, weights[rows])
        torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(got[1], want[1], atol=1e-5, rtol=1e-5)
        for a, b in zip(got[2], want[2]):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_packed_positions_past_the_end_hold_zeros_and_cost_nothing():
    tok = tiny.char_tokenizer()
    model = tiny.new_model("nano", "llama", tok, context=256, seed=1)
    lengths = [10, 1, 3, 7, 10, 2, 5, 9, 4, 10, 6, 8]
    samples = ragged(model, tok, lengths)
    with torch.no_grad():
        logp = loss.token_logprobs(model, samples, torch.arange(12))[0]
    assert torch.equal(logp != 0, samples.completion_mask.bool())
    owner = torch.arange(12) // 4
    lay = packed.layout(owner, samples.prompt_mask[::4].sum(1), torch.tensor(lengths))
    assert len(lay.inputs) == sum(lengths) - 12  # one input per token that predicts another


def test_only_the_reproduced_layer_variants_are_packed():
    tok = tiny.char_tokenizer()
    assert not packed.supports(tiny.new_model("nano", "gpt2", tok, context=64))
    model = tiny.new_model("nano", "llama", tok, context=64)
    model.config.attention_dropout = 0.1
    assert not packed.supports(model)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 6)), min_size=1, max_size=8),
       st.lists(st.integers(1, 5), min_size=3, max_size=3))
def test_layout_matches_a_loop_over_rows(rows, prompt_lengths):
    owner = torch.tensor([o for o, _ in rows])
    lengths = torch.tensor([n for _, n in rows])
    lay = packed.layout(owner, torch.tensor(prompt_lengths), lengths)
    width = max(1, max(n for _, n in rows))
    inputs, outputs, sources, positions, k = [], [], [], [], 0
    for r, (o, n) in enumerate(rows):
        n = max(n, 1)
        first = k
        for j in range(n - 1):
            inputs.append(r * (width - 1) + j)
            positions.append(prompt_lengths[o] + j)
            k += 1
        for j in range(n):
            outputs.append(r * width + j)
            sources.append(r if j == 0 else len(rows) + first + j - 1)
    assert lay.width == width
    assert lay.inputs.tolist() == inputs and lay.positions.tolist() == positions
    assert lay.outputs.tolist() == outputs and lay.sources.tolist() == sources
