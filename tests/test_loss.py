"""The shared-prefix, length-bucketed log-probabilities equal one joint forward per row; the
PPO-clip loss (clip-higher, entropy bonus) on hand-computed cases."""

from __future__ import annotations

import math

import pytest
import torch

from training import tiny
from evo.policies.sampler import Sampler
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


def one_token_loss(ratio: float, advantage: float, **clip) -> loss.LossParts:
    logp = torch.tensor([[math.log(ratio)]])
    all_logp = torch.log(torch.tensor([[[0.5, 0.5]]]))
    return loss.ppo_clip_loss(logp, all_logp, torch.zeros(1, 1), torch.tensor([advantage]), torch.ones(1, 1),
                              normalizer=1.0, **clip)


def test_clip_higher_raises_the_cap_on_a_good_token_only():
    # ratio 1.5, A = +1: the loss is -min(1.5, 1 + eps_high) -> -1.2, -1.28, -1.5 (no clip).
    for eps_high, expected, clipped in [(0.2, -1.2, 1.0), (0.28, -1.28, 1.0), (1.0, -1.5, 0.0)]:
        parts = one_token_loss(1.5, 1.0, eps_low=0.2, eps_high=eps_high)
        assert parts.loss.item() == pytest.approx(expected, rel=1e-6) and parts.clipped == clipped
    # A = -1: -min(-1.5, -(1 + eps_high)) = 1.5 whatever eps_high is.
    assert one_token_loss(1.5, -1.0, eps_low=0.2, eps_high=0.2).loss.item() == pytest.approx(1.5, rel=1e-6)
    assert one_token_loss(1.5, -1.0, eps_low=0.2, eps_high=0.28).loss.item() == pytest.approx(1.5, rel=1e-6)
    # ratio 0.5, A = -1: -min(-0.5, -(1 - eps_low)) -> 0.8 with eps_low 0.2, 0.5 with 0.6 (no clip).
    assert one_token_loss(0.5, -1.0, eps_low=0.2, eps_high=0.28).loss.item() == pytest.approx(0.8, rel=1e-6)
    assert one_token_loss(0.5, -1.0, eps_low=0.6, eps_high=0.28).loss.item() == pytest.approx(0.5, rel=1e-6)


def test_entropy_bonus_subtracts_coef_times_token_entropy_normalized_like_the_loss():
    # One rollout, two tokens over a 2-letter vocabulary: p = (0.5, 0.5) then (0.9, 0.1).
    # H = ln 2 = 0.693147 and -(0.9 ln 0.9 + 0.1 ln 0.1) = 0.325083; ratio 1, A = 2, normalizer 4.
    logits = torch.log(torch.tensor([[[0.5, 0.5], [0.9, 0.1]]])).requires_grad_()
    all_logp = torch.log_softmax(logits, dim=-1)
    logp = all_logp[..., 0]
    common = dict(eps_low=0.2, eps_high=0.2, normalizer=4.0)
    args = (logp, all_logp, logp.detach(), torch.tensor([2.0]))
    plain = loss.ppo_clip_loss(*args, torch.ones(1, 2), **common)
    assert plain.loss.item() == pytest.approx(-1.0, rel=1e-6)
    bonus = loss.ppo_clip_loss(*args, torch.ones(1, 2), entropy_coef=0.1, **common)
    assert bonus.loss.item() == pytest.approx((-4 - 0.1 * (0.693147 + 0.325083)) / 4, rel=1e-5)  # -1.0254558
    assert bonus.entropy == pytest.approx(0.693147 + 0.325083, rel=1e-5)  # the logged sum is unchanged
    masked = loss.ppo_clip_loss(*args, torch.tensor([[1.0, 0.0]]), entropy_coef=0.1, **common)
    assert masked.loss.item() == pytest.approx((-2 - 0.1 * 0.693147) / 4, rel=1e-5)  # a masked token adds nothing
    # With A = 0 only the bonus is left; dH/dz_i = -p_i (ln p_i + H), so for the 0.9 token
    # d loss / dz_0 = 0.1 * 0.9 * (ln 0.9 + 0.325083) / 4 = +0.0049438: descent flattens p.
    alone = loss.ppo_clip_loss(logp, all_logp, logp.detach(), torch.tensor([0.0]), torch.ones(1, 2),
                               entropy_coef=0.1, **common)
    alone.loss.backward()
    assert float(logits.grad[0, 1, 0]) == pytest.approx(0.0049438, rel=1e-4)
    assert float(logits.grad[0, 0, 0]) == pytest.approx(0.0, abs=1e-7)  # the uniform token is at the maximum
