"""The shared-prefix, length-bucketed log-probabilities equal one joint forward per row."""

from __future__ import annotations

import pytest
import torch

from evo import tiny
from evo.policies.local import Sampler
from training import loss
from training.loss import positions, token_logprobs


def joint_logprobs(model, samples, rows):
    """The reference: prompt and completion through one forward, row by row."""
    ids = torch.cat([samples.prompt_ids[rows], samples.completion_ids[rows]], dim=1)
    mask = torch.cat([samples.prompt_mask[rows], torch.ones_like(samples.completion_ids[rows])], dim=1)
    start = samples.prompt_ids.shape[1] - 1
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits[:, start:-1]
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, samples.completion_ids[rows][..., None]).squeeze(-1)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
@pytest.mark.parametrize("bucket_rows", [3, 1000])
def test_shared_prefix_matches_the_joint_forward_and_its_gradient(arch, bucket_rows, monkeypatch):
    monkeypatch.setattr(loss, "BUCKET_ROWS", bucket_rows)
    tok = tiny.char_tokenizer()
    model = tiny.new_model("nano", arch, tok, context=256, seed=1)
    # prompts of different lengths (left padding), completions of different lengths (eos)
    samples = Sampler(model, tok).sample(["ab", "a much longer prompt:", "xyz=1"], n=4, max_new_tokens=12,
                                         temperature=1.0, seed=3)
    mask = samples.completion_mask.float()
    assert len(set(mask.sum(1).tolist())) > 1, "the test needs completions of several lengths"
    for rows in (torch.arange(12), torch.arange(5, 11)):
        model.zero_grad()
        ours, all_logp = token_logprobs(model, samples, rows)
        (ours * mask[rows]).sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        reference = joint_logprobs(model, samples, rows)
        (reference * mask[rows]).sum().backward()
        torch.testing.assert_close(ours * mask[rows], reference * mask[rows], atol=2e-5, rtol=1e-4)
        for got, want in zip(grads, (p.grad for p in model.parameters())):
            torch.testing.assert_close(got, want, atol=5e-5, rtol=1e-3)
        # every token's distribution sums to one on real completion tokens
        sums = all_logp.exp().sum(-1)[mask[rows] > 0]
        torch.testing.assert_close(sums, torch.ones_like(sums))
        # the sampler's own log-probabilities agree (the model was in eval mode for both)
        torch.testing.assert_close(ours.detach() * mask[rows], samples.logprobs[rows], atol=1e-4, rtol=1e-3)
