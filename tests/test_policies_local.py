"""The `local:` sampler on real tiny models: agreement with transformers, logprobs, stops, seeds."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import AutoModelForCausalLM, GPTNeoXConfig

from training import tiny
from evo.errors import UserError
from evo.policies import load
from evo.policies import fastlm
from evo.policies.sampler import Sampler, _HFBackend
from evo.policies.sampling import first_stop, inverse_cdf, sample_next, tokens_through_stop, top_p_filter

torch.set_num_threads(1)
TOK = tiny.char_tokenizer()
PROMPTS = ["def f(x):\n    return", "a", "x = [1, 2, 3]  # a list"]  # different lengths: left padding


def sharp_model(arch: str, seed: int = 0) -> torch.nn.Module:
    """A random model with larger weights, so that its samples and greedy paths vary."""
    return sharpen(tiny.new_model("nano", arch, TOK, context=256, seed=seed))


def sharpen(model: torch.nn.Module) -> torch.nn.Module:
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(15.0)
    return model


@pytest.fixture(scope="module", params=tiny.ARCHS)
def model(request) -> torch.nn.Module:
    return sharp_model(request.param)


def teacher_forced(model, prompt: str, ids: tuple[int, ...], temperature: float = 1.0) -> torch.Tensor:
    """Log-probabilities of `ids` after `prompt`, from one full forward pass."""
    x = torch.tensor([TOK(prompt).input_ids + list(ids)])
    with torch.no_grad():
        logits = model(input_ids=x).logits[0, -len(ids) - 1:-1] / temperature
    return logits.log_softmax(-1).gather(-1, torch.tensor(ids)[:, None])[:, 0]


@pytest.mark.parametrize("fast", [True, False], ids=["fastlm", "hf-forward"])
def test_greedy_matches_transformers_generate(model, fast: bool) -> None:
    out = Sampler(model, TOK, fast=fast).sample(PROMPTS, n=2, max_new_tokens=24, temperature=0.0, ignore_eos=True)
    x = TOK(PROMPTS, padding=True, return_tensors="pt")
    ref = model.generate(**x, max_new_tokens=24, do_sample=False, eos_token_id=None, pad_token_id=tiny.PAD_ID)
    ref = ref[:, x.input_ids.shape[1]:].tolist()
    for i, group in enumerate(out.completions):
        assert len(group) == 2
        for c in group:
            assert list(c.token_ids) == ref[i] and c.finish_reason == "length"
    assert len({c.token_ids for group in out.completions for c in group}) > 1  # the model is not degenerate


@pytest.mark.parametrize("fast", [True, False], ids=["fastlm", "hf-forward"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_match_a_full_forward_pass(model, temperature: float, fast: bool) -> None:
    out = Sampler(model, TOK, fast=fast).sample(PROMPTS, n=3, max_new_tokens=16, temperature=temperature, seed=1)
    for prompt, group in zip(PROMPTS, out.completions):
        for c in group:
            assert len(c.logprobs) == len(c.token_ids) > 0
            ref = teacher_forced(model, prompt, c.token_ids, temperature)
            assert torch.allclose(torch.tensor(c.logprobs), ref, atol=1e-3)


def test_fast_path_covers_grouped_query_attention() -> None:
    cfg = tiny.config("nano", "llama", TOK, context=128)
    cfg.num_key_value_heads = 1  # 2 query heads share one key/value head
    model = sharpen(AutoModelForCausalLM.from_config(cfg).eval())
    assert fastlm.supports(model)
    out = Sampler(model, TOK).sample(PROMPTS, n=2, max_new_tokens=8, seed=0)
    for prompt, group in zip(PROMPTS, out.completions):
        for c in group:
            assert torch.allclose(torch.tensor(c.logprobs), teacher_forced(model, prompt, c.token_ids), atol=1e-3)


def test_fast_path_covers_qwen2_biases_and_grouped_heads() -> None:
    model = sharp_model("qwen2")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 2.0)  # q/k/v biases (zero at init) must enter the fast path's projections
    assert fastlm.supports(model) and model.config.num_key_value_heads < model.config.num_attention_heads
    out = Sampler(model, TOK).sample(PROMPTS, n=2, max_new_tokens=10, seed=0)
    for prompt, group in zip(PROMPTS, out.completions):
        for c in group:
            assert torch.allclose(torch.tensor(c.logprobs), teacher_forced(model, prompt, c.token_ids), atol=1e-3)
    model.config.use_sliding_window = True
    assert not fastlm.supports(model)


def test_other_architectures_use_the_model_forward() -> None:
    cfg = GPTNeoXConfig(vocab_size=len(TOK), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, max_position_embeddings=128, eos_token_id=tiny.EOS_ID)
    model = AutoModelForCausalLM.from_config(cfg).eval()
    assert not fastlm.supports(model)
    out = Sampler(model, TOK).sample(PROMPTS, n=2, max_new_tokens=6, temperature=0.0, ignore_eos=True)
    x = TOK(PROMPTS, padding=True, return_tensors="pt")
    ref = model.generate(**x, max_new_tokens=6, do_sample=False, eos_token_id=None, pad_token_id=tiny.PAD_ID)
    assert [list(g[0].token_ids) for g in out.completions] == ref[:, x.input_ids.shape[1]:].tolist()


def test_sampling_mid_training_uses_eval_mode_and_restores_it() -> None:
    model = tiny.new_model("nano", "gpt2", TOK, context=64)
    model.config.resid_pdrop = model.config.embd_pdrop = model.config.attn_pdrop = 0.5
    dropped = AutoModelForCausalLM.from_config(model.config)
    dropped.load_state_dict(model.state_dict())
    dropped.train()
    sampler = Sampler(dropped, TOK, fast=False)
    a = sampler.sample(["ab"], n=1, max_new_tokens=8, seed=0).completions[0][0]
    b = sampler.sample(["ab"], n=1, max_new_tokens=8, seed=0).completions[0][0]
    assert a == b and dropped.training


def test_rollout_tensors_line_up_with_completions(model) -> None:
    out = Sampler(model, TOK).sample(PROMPTS, n=2, max_new_tokens=10, seed=2, stop=["e"])
    flat = [c for group in out.completions for c in group]
    assert out.prompt_ids.shape[0] == out.completion_ids.shape[0] == len(flat) == 6
    for row, c in enumerate(flat):
        k = len(c.token_ids)
        assert out.completion_mask[row].sum() == k
        assert out.completion_ids[row, :k].tolist() == list(c.token_ids)
        assert torch.allclose(out.logprobs[row, :k], torch.tensor(c.logprobs))
        assert (out.completion_ids[row, k:] == tiny.PAD_ID).all() and (out.logprobs[row, k:] == 0).all()
    assert out.prompt_mask[:, 0].tolist() == [0, 0, 0, 0, 1, 1]  # the longest prompt is unpadded


def test_seed_reproduces_and_varies(model) -> None:
    sampler = Sampler(model, TOK)

    def texts(seed):
        return [c.text for g in sampler.sample(PROMPTS, n=4, max_new_tokens=12, seed=seed).completions for c in g]

    first = texts(5)
    assert texts(5) == first
    assert texts(6) != first
    assert len(set(first[:4])) > 1  # the n samples of one prompt differ


def test_stop_strings_cut_text_and_keep_the_completing_token(model) -> None:
    sampler = Sampler(model, TOK)
    full = sampler.sample(PROMPTS, n=1, max_new_tokens=30, temperature=0.0, ignore_eos=True).completions
    text = full[0][0].text
    stop = text[10:12]
    cut = text.find(stop)
    out = sampler.sample(PROMPTS, n=1, max_new_tokens=30, temperature=0.0, ignore_eos=True, stop=[stop, "@@@"])
    c = out.completions[0][0]
    assert c.text == text[:cut] and c.finish_reason == "stop"
    k, ids = len(c.token_ids), full[0][0].token_ids
    assert c.token_ids == ids[:k]  # the shortest prefix whose text holds the stop string
    assert stop in TOK.decode(ids[:k], skip_special_tokens=True)
    assert stop not in TOK.decode(ids[: k - 1], skip_special_tokens=True)


def test_eos_ends_a_completion(model) -> None:
    sampler = Sampler(model, TOK)
    greedy = sampler.sample(["a"], n=1, max_new_tokens=8, temperature=0.0).completions[0][0]
    sampler.eos_ids = (greedy.token_ids[2],)  # pretend the third greedy token is end-of-sequence
    c = sampler.sample(["a"], n=1, max_new_tokens=8, temperature=0.0).completions[0][0]
    first = greedy.token_ids.index(greedy.token_ids[2])
    assert c.token_ids == greedy.token_ids[: first + 1] and c.finish_reason == "stop"


@pytest.mark.parametrize("fast", [True, False], ids=["fastlm", "hf-forward"])
def test_finished_rows_leave_the_batch(model, fast: bool, monkeypatch) -> None:
    sampler = Sampler(model, TOK, fast=fast)
    sampler.eos_ids = tuple(range(4, 40))  # a third of the alphabet ends a row: lengths spread out
    backend = fastlm.FastLM if fast else _HFBackend
    calls = []
    select = backend.select
    monkeypatch.setattr(backend, "select", lambda self, keep: calls.append(len(keep)) or select(self, keep))
    out = sampler.sample(PROMPTS, n=8, max_new_tokens=24, seed=0)
    assert calls and calls == sorted(calls, reverse=True)  # the batch shrank, more than once or once
    lengths = {len(c.token_ids) for g in out.completions for c in g}
    assert len(lengths) > 4
    for prompt, group in zip(PROMPTS, out.completions):
        for c in group:
            assert c.finish_reason == "stop" and c.token_ids[-1] in sampler.eos_ids
            assert all(t not in sampler.eos_ids for t in c.token_ids[:-1])
            assert torch.allclose(torch.tensor(c.logprobs), teacher_forced(model, prompt, c.token_ids), atol=1e-3)


def test_token_id_prompts_and_context_limit() -> None:
    model = tiny.new_model("nano", "llama", TOK, context=32)
    sampler = Sampler(model, TOK)
    out = sampler.sample([[tiny.BOS_ID] + [10] * 20], n=1, max_new_tokens=100, ignore_eos=True)
    assert len(out.completions[0][0].token_ids) == 32 - 21  # capped at the context, finish "length"
    with pytest.raises(UserError, match="context of 32 tokens"):
        sampler.sample(["x" * 40], n=1, max_new_tokens=4)


@pytest.mark.parametrize("setting, message", [
    ({"temperature": float("nan")}, "local: temperature: expected a finite number >= 0, got nan"),
    ({"temperature": -1.0}, "local: temperature: expected a finite number >= 0, got -1.0"),
    ({"top_p": 0.0}, r"local: top_p: expected a finite number in \(0, 1\], got 0.0"),
    ({"top_p": float("inf")}, r"local: top_p: expected a finite number in \(0, 1\], got inf"),
    ({"max_new_tokens": 0}, "local: max_new_tokens: expected an integer >= 1, got 0"),
    ({"n": 0}, "local: n: expected an integer >= 1, got 0"),
])
def test_sampling_arguments_are_range_checked(setting: dict, message: str) -> None:
    sampler = Sampler(tiny.new_model("nano", "llama", TOK, context=32), TOK)
    with pytest.raises(UserError, match=f"^{message}$"):
        sampler.sample(["x"], **{"n": 1, "max_new_tokens": 4, **setting})


def test_a_temperature_too_small_to_divide_by_is_greedy() -> None:
    logits = torch.tensor([[1.0, 3.0, 2.0], [0.5, -1.0, 0.0]])
    greedy = sample_next(logits, 0.0, 1.0, None)
    for temperature in (1e-300, 1e-6):
        tokens, logprobs = sample_next(logits, temperature, 1.0, None)
        assert tokens.tolist() == greedy[0].tolist() == [1, 0]
        assert torch.isfinite(logprobs).all() and torch.equal(logprobs, greedy[1])


def test_local_policy_loads_a_directory(tmp_path) -> None:
    tiny.save(tiny.new_model("nano", "gpt2", TOK, context=128).half(), TOK, tmp_path)  # shipped as float16
    policy = load(f"local:{tmp_path}", device="cpu")
    assert policy.sampler.model.dtype == torch.float32
    out = policy.generate(["hi", "there"], n=3, max_new_tokens=5, seed=0)
    assert [len(g) for g in out] == [3, 3] and all(len(c.token_ids) <= 5 for g in out for c in g)


def test_load_errors_are_one_line(tmp_path) -> None:
    for uri, message in [("local:/no/such/dir", "no model directory"), ("ftp:x", "unknown policy"),
                         (f"local:{tmp_path}", "no config.json"), ("local:not-shipped", "shipped: ")]:
        with pytest.raises(UserError, match=message) as err:
            load(uri)
        assert "\n" not in str(err.value)


# Pure helpers, checked against brute force.

@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-20, 20), min_size=2, max_size=8, unique=True), st.floats(0.05, 1.0))
def test_top_p_keeps_the_smallest_prefix_reaching_p(logits: list[int], p: float) -> None:
    x = torch.tensor([logits], dtype=torch.float64) / 4  # distinct logits: no ties in the order
    kept = torch.isfinite(top_p_filter(x, p))[0]
    probs = x.softmax(-1)[0]
    order = probs.argsort(descending=True)
    mass, want = 0.0, torch.zeros_like(kept)
    for i in order.tolist():
        if mass >= p:
            break
        want[i], mass = True, mass + probs[i].item()
    assert kept.tolist() == want.tolist()


def test_sampling_draws_from_the_distribution() -> None:
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]]).repeat(20000, 1)
    generator = torch.Generator().manual_seed(0)
    tokens, logp = sample_next(logits, 1.0, 1.0, generator)
    freq = torch.bincount(tokens, minlength=4).float() / len(tokens)
    assert torch.allclose(freq, logits[0].softmax(-1), atol=0.015)
    assert torch.allclose(logp, logits[0].log_softmax(-1)[tokens])
    tokens, _ = sample_next(logits[:2000], 1.0, 0.5, generator)  # top-p 0.5 keeps only the first
    assert (tokens == 0).all()


@pytest.mark.parametrize("vocab", [3, 256, 700])
def test_inverse_cdf_draws_each_token_at_its_probability_across_blocks(vocab: int) -> None:
    """Blocks of BLOCK tokens and a partial last block (700 = 2 x 256 + 188); zero-probability
    tokens (every 7th, and the last ones) are never drawn, even at draws of 0 and just under 1."""
    logits = torch.randn(vocab, generator=torch.Generator().manual_seed(vocab)) * 2
    logits[::7] = float("-inf")
    logits[-3:] = float("-inf") if vocab > 3 else logits[-3:]
    probs = logits.softmax(-1)
    draws = 200_000
    uniform = torch.rand(draws, generator=torch.Generator().manual_seed(1))
    uniform[:2] = torch.tensor([0.0, 1.0 - 2.0 ** -24])
    tokens = inverse_cdf(probs.repeat(draws, 1), uniform)
    assert (probs[tokens] > 0).all()
    freq = torch.bincount(tokens, minlength=vocab).double() / draws
    sd = (probs.double() * (1 - probs.double()) / draws).sqrt()
    assert ((freq - probs.double()).abs() <= 5 * sd + 1e-6).all()


def test_stop_helpers() -> None:
    assert first_stop("abcdef", ["de", "bc", "zz"]) == 1 and first_stop("abc", ["x"]) == -1

    def decode(ids):
        return "".join(chr(96 + i) for i in ids)

    assert tokens_through_stop([1, 2, 3, 4, 5], 2, ["cd"], decode) == 4
