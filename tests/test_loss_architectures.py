"""`token_logprobs` gives a plain forward's log-probabilities and gradients for every layout the
trainer takes: tiny random Qwen2, Llama, Gemma2 (sliding window, logit softcap), Falcon-H1
(attention + Mamba in each layer, lm_head_multiplier), Bamba (Mamba and attention layers) and
Qwen2-MoE, against `log_softmax(model(input_ids).logits)` row by row, without padding."""

from __future__ import annotations

import pytest
import torch
import transformers

from evo.policies.sampler import Rollout
from training import loss

torch.set_num_threads(1)

VOCAB, TOLERANCE = 40, 1e-4
COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
              num_key_value_heads=1, max_position_embeddings=128, pad_token_id=0, eos_token_id=1)
MAMBA = dict(mamba_n_heads=4, mamba_d_head=8, mamba_d_state=8, mamba_chunk_size=8)
CONFIGS = {
    "qwen2": lambda: transformers.Qwen2Config(**COMMON, tie_word_embeddings=True),
    "llama": lambda: transformers.LlamaConfig(**COMMON, tie_word_embeddings=False),
    "gemma2": lambda: transformers.Gemma2Config(**COMMON, head_dim=16, sliding_window=8),
    "falcon_h1": lambda: transformers.FalconH1Config(**COMMON, **MAMBA, mamba_d_ssm=32, lm_head_multiplier=0.25),
    "bamba": lambda: transformers.BambaConfig(**COMMON, **MAMBA, attn_layer_indices=[1], mamba_expand=1),
    "qwen2_moe": lambda: transformers.Qwen2MoeConfig(**COMMON, moe_intermediate_size=32, shared_expert_intermediate_size=32,
                                                     num_experts=4, num_experts_per_tok=2),
}
SHARED = {"qwen2": True, "llama": True, "gemma2": True, "qwen2_moe": True, "falcon_h1": False, "bamba": False}


def model_of(arch: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(CONFIGS[arch]()).eval()


def rollout(prompt_lengths: tuple[int, int], n: int = 3, width: int = 9) -> Rollout:
    """Two prompts (left-padded) of n rollouts each, completions of lengths 1..9 (right-padded)."""
    g = torch.Generator().manual_seed(0)
    rows, columns = 2 * n, max(prompt_lengths)
    prompt_ids, prompt_mask = torch.zeros(rows, columns, dtype=torch.long), torch.zeros(rows, columns, dtype=torch.long)
    for b, length in enumerate(prompt_lengths):
        prompt_ids[b * n:(b + 1) * n, columns - length:] = torch.randint(2, VOCAB, (length,), generator=g)
        prompt_mask[b * n:(b + 1) * n, columns - length:] = 1
    completion_ids, completion_mask = torch.zeros(rows, width, dtype=torch.long), torch.zeros(rows, width, dtype=torch.long)
    for r, length in enumerate([9, 3, 6, 1, 8, 5][:rows]):
        completion_ids[r, :length] = torch.randint(2, VOCAB, (length,), generator=g)
        completion_mask[r, :length] = 1
    return Rollout(prompt_ids, prompt_mask, completion_ids, completion_mask, torch.zeros(rows, width), [[None] * n] * 2)


def plain_logprobs(model: torch.nn.Module, samples: Rollout, rows: torch.Tensor) -> torch.Tensor:
    """The reference: each row's prompt + completion, unpadded, through the model's own forward."""
    out = torch.zeros(len(rows), samples.completion_ids.shape[1])
    for i, r in enumerate(rows.tolist()):
        prompt = samples.prompt_ids[r][samples.prompt_mask[r].bool()]
        completion = samples.completion_ids[r, :int(samples.completion_mask[r].sum())]
        logits = model(input_ids=torch.cat([prompt, completion])[None]).logits[0, len(prompt) - 1:-1]
        out[i, :len(completion)] = torch.log_softmax(logits.float(), -1).gather(-1, completion[:, None])[:, 0]
    return out


def values_and_gradients(model, logprobs, weights) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad()
    values = logprobs()
    (values * weights).sum().backward()
    return values.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


CASES = [(arch, (4, 7)) for arch in CONFIGS] + [("gemma2", (10, 14))]  # the last: prompts past the sliding window


@pytest.mark.parametrize("arch, prompt_lengths", CASES, ids=[f"{a}-{max(p)}" for a, p in CASES])
def test_values_and_gradients_equal_a_plain_forwards(arch, prompt_lengths):
    model, samples, rows = model_of(arch), rollout(prompt_lengths), torch.arange(6)
    assert loss.shares_prompt_cache(model, max(prompt_lengths)) is (SHARED[arch] and max(prompt_lengths) < 8)
    weights = torch.randn(6, 9, generator=torch.Generator().manual_seed(1)) * samples.completion_mask
    ours, our_grads = values_and_gradients(model, lambda: loss.token_logprobs(model, samples, rows)[0], weights)
    want, want_grads = values_and_gradients(model, lambda: plain_logprobs(model, samples, rows), weights)
    assert float((ours - want).abs().max() / want.abs().max()) < TOLERANCE
    assert set(our_grads) == set(want_grads) == {name for name, p in model.named_parameters() if p.requires_grad}
    errors = {name: float((our_grads[name] - g).norm() / g.norm().clamp_min(1e-30)) for name, g in want_grads.items()}
    worst = max(errors, key=errors.__getitem__)
    assert errors[worst] < TOLERANCE, f"{arch}: {worst}'s gradient is {errors[worst]:.3g} off (relative)"
