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


@torch.no_grad()
def joint_entropy(model, samples, rows):
    ids = torch.cat([samples.prompt_ids[rows], samples.completion_ids[rows]], dim=1)
    mask = torch.cat([samples.prompt_mask[rows], torch.ones_like(samples.completion_ids[rows])], dim=1)
    start = samples.prompt_ids.shape[1] - 1
    logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits[:, start:-1], -1)
    return -(logp.exp() * logp).sum(-1)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
@pytest.mark.parametrize("bucket_rows", [3, 1000])
def test_shared_prefix_matches_the_joint_forward_and_its_gradient(arch, bucket_rows, monkeypatch):
    monkeypatch.setattr(loss, "BUCKET_ROWS", bucket_rows)
    tok = tiny.char_tokenizer()
    model = tiny.new_model("nano", arch, tok, context=256, seed=1)
    # prompts of different lengths (left padding), completions of different lengths (eos)
    samples = Sampler(model, tok).sample(["ab", "a much longer prompt:", "xyz=1"], n=4, max_new_tokens=24,
                                         temperature=1.0, seed=3)
    mask = samples.completion_mask.float()
    assert len(set(mask.sum(1).tolist())) > 1, "the test needs completions of several lengths"
    for rows in (torch.arange(12), torch.arange(5, 11)):
        model.zero_grad()
        ours, entropy = token_logprobs(model, samples, rows, entropy=True)
        (ours * mask[rows]).sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        reference = joint_logprobs(model, samples, rows)
        (reference * mask[rows]).sum().backward()
        torch.testing.assert_close(ours * mask[rows], reference * mask[rows], atol=2e-5, rtol=1e-4)
        for got, want in zip(grads, (p.grad for p in model.parameters())):
            torch.testing.assert_close(got, want, atol=5e-5, rtol=1e-3)
        # each token's entropy is that of the joint forward's full distribution
        torch.testing.assert_close(entropy.detach() * mask[rows], joint_entropy(model, samples, rows) * mask[rows],
                                   atol=2e-5, rtol=1e-4)
        # the sampler's own log-probabilities agree (the model was in eval mode for both)
        torch.testing.assert_close(ours.detach() * mask[rows], samples.logprobs[rows], atol=1e-4, rtol=1e-3)


def one_token_loss(ratio: float, advantage: float, **clip) -> loss.LossParts:
    logp = torch.tensor([[math.log(ratio)]])
    return loss.ppo_clip_loss(logp, None, torch.zeros(1, 1), torch.tensor([advantage]), torch.ones(1, 1),
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
    logp, entropy = loss.chosen_logprobs(logits, None, torch.zeros(1, 2, dtype=torch.long), entropy=True)
    common = dict(eps_low=0.2, eps_high=0.2, normalizer=4.0)
    args = (logp, entropy, logp.detach(), torch.tensor([2.0]))
    plain = loss.ppo_clip_loss(*args, torch.ones(1, 2), **common)
    assert plain.loss.item() == pytest.approx(-1.0, rel=1e-6)
    bonus = loss.ppo_clip_loss(*args, torch.ones(1, 2), entropy_coef=0.1, **common)
    assert bonus.loss.item() == pytest.approx((-4 - 0.1 * (0.693147 + 0.325083)) / 4, rel=1e-5)  # -1.0254558
    assert bonus.entropy == pytest.approx(0.693147 + 0.325083, rel=1e-5)  # the logged sum is unchanged
    masked = loss.ppo_clip_loss(*args, torch.tensor([[1.0, 0.0]]), entropy_coef=0.1, **common)
    assert masked.loss.item() == pytest.approx((-2 - 0.1 * 0.693147) / 4, rel=1e-5)  # a masked token adds nothing
    # With A = 0 only the bonus is left; dH/dz_i = -p_i (ln p_i + H), so for the 0.9 token
    # d loss / dz_0 = 0.1 * 0.9 * (ln 0.9 + 0.325083) / 4 = +0.0049438: descent flattens p.
    alone = loss.ppo_clip_loss(logp, entropy, logp.detach(), torch.tensor([0.0]), torch.ones(1, 2),
                               entropy_coef=0.1, **common)
    alone.loss.backward()
    assert float(logits.grad[0, 1, 0]) == pytest.approx(0.0049438, rel=1e-4)
    assert float(logits.grad[0, 0, 0]) == pytest.approx(0.0, abs=1e-7)  # the uniform token is at the maximum


@pytest.mark.parametrize("chunk_tokens", [1, 5, 10**6])
def test_chunked_head_equals_the_full_log_softmax_and_its_gradient(chunk_tokens, monkeypatch):
    """Chunks of the head's positions (recomputed in the backward) give the full (N, T, V)
    log-softmax's values, entropies and gradients, through the head's weight too."""
    vocab = 50
    monkeypatch.setattr(loss, "LOGIT_BYTES_DEFAULT", 4 * vocab * chunk_tokens)
    torch.manual_seed(0)
    head = torch.nn.Linear(16, vocab, bias=False)
    hidden = torch.randn(3, 7, 16, requires_grad=True)
    targets = torch.randint(0, vocab, (3, 7))
    weights = torch.randn(3, 7)
    got, entropy = loss.chosen_logprobs(hidden, head, targets, entropy=True)
    ((got + 0.3 * entropy) * weights).sum().backward()
    grads = hidden.grad.clone(), head.weight.grad.clone()
    hidden.grad, head.weight.grad = None, None
    full = torch.log_softmax(head(hidden), -1)
    want = full.gather(-1, targets[..., None]).squeeze(-1)
    want_entropy = -(full.exp() * full).sum(-1)
    ((want + 0.3 * want_entropy) * weights).sum().backward()
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(entropy, want_entropy)
    torch.testing.assert_close(grads[0], hidden.grad)
    torch.testing.assert_close(grads[1], head.weight.grad)
    assert loss.chosen_logprobs(hidden, head, targets, entropy=False)[1] is None


def test_a_head_that_rescales_its_logits_runs_through_the_models_own_forward(monkeypatch):
    """A config with a logit cap (Gemma-style) is not split into backbone + head."""
    tok = tiny.char_tokenizer()
    model = tiny.new_model("nano", "llama", tok, context=64, seed=1)
    assert loss.head_parts(model) is not None
    samples = Sampler(model, tok).sample(["ab", "xyz=1"], n=2, max_new_tokens=6, temperature=1.0, seed=3)
    rows = torch.arange(4)
    split = token_logprobs(model, samples, rows)[0]
    model.config.final_logit_softcapping = 30.0
    assert loss.head_parts(model) is None
    model.config.final_logit_softcapping = None
    monkeypatch.setattr(loss, "head_parts", lambda m: None)
    whole = token_logprobs(model, samples, rows)[0]
    torch.testing.assert_close(split, whole, atol=2e-5, rtol=1e-4)


def test_tis_weights_are_one_where_the_engines_agree_capped_and_without_gradient():
    trainer_logp = torch.tensor([[-1.0, -2.0, -0.5, -3.0]], requires_grad=True)
    sampler_logp = torch.tensor([[-1.0, -2.0 - math.log(1.5), -0.5 - math.log(10.0), -3.0 + math.log(4.0)]])
    weights = loss.tis_weights(trainer_logp, sampler_logp, cap=2.0)
    torch.testing.assert_close(weights, torch.tensor([[1.0, 1.5, 2.0, 0.25]]))
    assert not weights.requires_grad  # a weight, not a path for the gradient
    assert loss.tis_weights(trainer_logp, sampler_logp, cap=1e9)[0, 2].item() == pytest.approx(10.0, rel=1e-5)


def test_tis_weights_scale_the_policy_term_only_and_ones_change_nothing():
    logits = torch.log(torch.tensor([[[0.5, 0.5], [0.9, 0.1]]]))
    args = dict(eps_low=0.2, eps_high=0.2, normalizer=4.0)

    def loss_and_grad(**extra):
        z = logits.clone().requires_grad_()
        logp, entropy = loss.chosen_logprobs(z, None, torch.zeros(1, 2, dtype=torch.long), entropy=True)
        parts = loss.ppo_clip_loss(logp, entropy, logp.detach() - 0.1, torch.tensor([2.0]), torch.ones(1, 2),
                                   ref_logp=logp.detach() + 0.3, kl_coef=0.5, entropy_coef=0.1, **args, **extra)
        parts.loss.backward()
        return parts, z.grad

    plain, plain_grad = loss_and_grad()
    ones, ones_grad = loss_and_grad(is_weights=torch.ones(1, 2))
    assert torch.equal(plain.loss, ones.loss) and torch.equal(plain_grad, ones_grad)  # bit-identical
    # weights (3, 0.5) scale the two tokens' policy terms, -A * ratio = -2 * exp(0.1) each (1.105
    # is under the 1.2 clip); the entropy bonus and the KL term are untouched.
    weighted, _ = loss_and_grad(is_weights=torch.tensor([[3.0, 0.5]]))
    policy = -2.0 * math.exp(0.1)
    assert (weighted.loss - plain.loss).item() * 4 == pytest.approx(policy * (3 - 1) + policy * (0.5 - 1), rel=1e-5)
    assert weighted.kl == plain.kl and weighted.entropy == plain.entropy
