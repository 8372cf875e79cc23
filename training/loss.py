"""Token log-probabilities and the PPO-clip loss (token sums normalized by a constant), with
optional truncated importance-sampling weights for rollouts another engine sampled."""

from __future__ import annotations

import inspect
import sys
import weakref
from dataclasses import dataclass

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

from evo.policies.sampler import Rollout, cache_argument
from training import packed


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that follow the attention mask (left padding), as the sampler uses."""
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


BUCKET_ROWS = 32  # completions are run in length buckets of about this many rows
LOGIT_BYTES = {"cuda": 256 << 20}  # float32 logits `chosen_logprobs` forms at once, per device type
LOGIT_BYTES_DEFAULT = 32 << 20  # elsewhere (CPU: its peak is ~5x this, tests/benchmarks/bench_update_memory.py)
SOFTCAPS = ("final_logit_softcapping", "logit_scale", "logits_scaling")  # known non-linear heads: not even checked
HEAD_CHECK_TOKENS = 8  # tokens of the one forward that checks a split head against the model's own logits
HEAD_TOLERANCE = 1e-3  # largest relative difference of the two paths' centred logits that passes
_head_checked: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> the check's verdict


def head_parts(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module] | None:
    """(backbone, lm_head) when the model's logits are `lm_head(backbone(...).last_hidden_state)`,
    so the loss can run the head chunk by chunk; None for heads that rescale or cap the logits
    (a SOFTCAPS key, or `head_agrees` finding a difference once, e.g. Falcon-H1's
    lm_head_multiplier). A peft (LoRA) wrapper is looked through: its adapters live inside the backbone."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    head, backbone = inner.get_output_embeddings(), getattr(inner, "base_model", None)
    if head is None or backbone is None or backbone is inner:
        return None
    if any(getattr(inner.config, key, None) not in (None, 1, 1.0) for key in SOFTCAPS):
        return None
    if inner not in _head_checked:
        _head_checked[inner] = head_agrees(model, backbone, head)
    return (backbone, head) if _head_checked[inner] else None


@torch.no_grad()
def head_agrees(model: torch.nn.Module, backbone: torch.nn.Module, head: torch.nn.Module) -> bool:
    """Whether `head(backbone(x))` gives the model's own logits on a few tokens (one real forward
    of each, centred logits within HEAD_TOLERANCE); when not, one line on stderr says the loss
    falls back to the model's forward."""
    vocab = getattr(head, "out_features", None) or head.weight.shape[0]
    ids = (torch.arange(1, HEAD_CHECK_TOKENS + 1, device=head.weight.device) % vocab)[None]
    own = model(input_ids=ids, use_cache=False).logits.float()
    split = head(backbone(input_ids=ids, use_cache=False).last_hidden_state).float()
    own, split = own - own.mean(-1, keepdim=True), split - split.mean(-1, keepdim=True)
    error = float((own - split).abs().max() / own.abs().max().clamp_min(1e-6))
    if error <= HEAD_TOLERANCE:
        return True
    print(f"warning: {type(model).__name__}'s logits are not its LM head over its last hidden states (relative "
          f"difference {error:.3g}: a logit multiplier or cap); log-probs use the model's own forward, which holds "
          "every position's full logits", file=sys.stderr, flush=True)
    return False


def split_head(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module | None]:
    """(backbone, head) from `head_parts`, or (the model, None): its own forward gives logits."""
    parts = head_parts(model)
    return parts if parts is not None else (model, None)


def chosen_logprobs(hidden: torch.Tensor, head: torch.nn.Module | None, targets: torch.Tensor,
                    entropy: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities of `targets` (...,) and, with `entropy`, each position's entropy, from
    final hidden states (..., H) through `head` (or from logits (..., V) when `head` is None).

    Never holds float32 logits of more than LOGIT_BYTES at once: the positions are cut into
    chunks, each chunk's logits live only inside it, and under autograd each chunk is
    recomputed in the backward (torch.utils.checkpoint) instead of kept. This is TRL's
    selective log-softmax idea, extended to the head's matmul and to the entropy."""
    shape = targets.shape
    flat, ids = hidden.reshape(-1, hidden.shape[-1]), targets.reshape(-1)
    vocab = head.out_features if head is not None else hidden.shape[-1]
    size = max(1, LOGIT_BYTES.get(hidden.device.type, LOGIT_BYTES_DEFAULT) // (4 * vocab))
    grad = torch.is_grad_enabled() and flat.requires_grad and len(ids) > size  # one chunk: nothing to save

    def piece(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = (head(x) if head is not None else x).float()
        norm = torch.logsumexp(logits, dim=-1)
        chosen = logits.gather(-1, y[:, None]).squeeze(-1) - norm
        if not entropy:
            return chosen, chosen.new_zeros(())
        return chosen, norm - (torch.softmax(logits, dim=-1) * logits).sum(-1)

    parts = [torch.utils.checkpoint.checkpoint(piece, x, y, use_reentrant=False) if grad else piece(x, y)
             for x, y in zip(flat.split(size), ids.split(size))]
    logp = torch.cat([p[0] for p in parts]).reshape(shape)
    return logp, (torch.cat([p[1] for p in parts]).reshape(shape) if entropy else None)


def token_logprobs(model: torch.nn.Module, samples: Rollout, rows: torch.Tensor, *,
                   entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities (len(rows), T) of the sampled tokens, and with `entropy` each token's
    entropy (len(rows), T); positions past a completion's end hold zeros.

    Equal to one forward over prompt + completion per row, but cheaper: each prompt is
    encoded once for all of its rollouts in `rows` (its keys and values are shared, so their
    gradients add up), and the completions run in buckets of similar length, each cut to its
    longest completion; Llama- and Qwen2-style models run padding-free instead
    (training/packed.py: every projection and MLP over the real tokens only); a model whose
    prompt state is not keys and values (Mamba layers, a sliding window shorter than the prompt:
    `shares_prompt_cache`) runs one forward per row (`joint_logprobs`). No
    (rows, T, vocabulary) tensor is formed: the head runs chunk by chunk (`chosen_logprobs`),
    in the model's dtype, with float32 log-sum-exps."""
    rows = rows.to(samples.completion_ids.device)
    if torch.is_grad_enabled() and checkpointed_layers(model):
        return joint_logprobs(model, samples, rows, entropy=entropy)
    group = samples.prompt_ids.shape[0] // len(samples.completions)
    prompts, inverse = torch.unique(rows // group, return_inverse=True)
    prompt_ids, prompt_mask = _trim_left(samples.prompt_ids[prompts * group], samples.prompt_mask[prompts * group])
    if not shares_prompt_cache(model, prompt_ids.shape[1]):
        return joint_logprobs(model, samples, rows, entropy=entropy)
    body, head = split_head(model)
    if head is not None and packed.supports(model):
        return packed_logprobs(body, head, samples, rows, inverse, prompt_ids, prompt_mask, entropy)
    cache_arg = cache_argument(body)
    prefix = body(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions(prompt_mask), use_cache=True)
    last = _output(prefix, head)
    keys_values = [(layer.keys, layer.values) for layer in getattr(prefix, cache_arg).layers]
    prompt_lengths = prompt_mask.sum(1)
    width = samples.completion_ids.shape[1]
    lengths = samples.completion_mask[rows].sum(1)
    logp = torch.zeros((len(rows), width), device=rows.device)
    ent = torch.zeros((len(rows), width), device=rows.device) if entropy else None
    for bucket in torch.argsort(lengths, stable=True).tensor_split(max(1, round(len(rows) / BUCKET_ROWS))):
        if len(bucket) == 0:
            continue
        owner, length = inverse[bucket], max(1, int(lengths[bucket].max()))
        completion = samples.completion_ids[rows[bucket], :length]
        states = last[owner, -1:]
        if length > 1:
            cache = DynamicCache(config=model.config)
            for layer, (k, v) in enumerate(keys_values):
                cache.update(k[owner], v[owner], layer)
            mask = torch.cat([prompt_mask[owner], torch.ones_like(completion[:, 1:])], dim=1)
            steps = prompt_lengths[owner, None] + torch.arange(length - 1, device=rows.device)
            rest = body(input_ids=completion[:, :-1], attention_mask=mask, position_ids=steps, **{cache_arg: cache})
            states = torch.cat([states, _output(rest, head)], dim=1)
        chosen, entropies = chosen_logprobs(states, head, completion, entropy)
        logp[bucket, :length] = chosen
        if ent is not None:
            ent[bucket, :length] = entropies
    past = samples.completion_mask[rows] == 0  # a bucket runs to its longest completion: zero the rest
    return logp.masked_fill(past, 0.0), None if ent is None else ent.masked_fill(past, 0.0)


def shares_prompt_cache(model: torch.nn.Module, prompt_width: int) -> bool:
    """Whether a prompt's cache, handed to its completions as keys and values, is all the state
    they need: every layer of the model's cache is full attention, or a sliding window that holds
    the whole prompt. A recurrent layer's state (the Mamba conv and SSM states of Falcon-H1, Bamba,
    Jamba) is not keys and values: such a model runs `joint_logprobs` (its gradients through the
    prompt's state are then the plain forward's)."""
    layers = DynamicCache(config=model.config).layers
    return all(type(layer) is DynamicLayer
               or (type(layer) is DynamicSlidingWindowLayer and prompt_width < layer.sliding_window)
               for layer in layers)


def packed_logprobs(body: torch.nn.Module, head: torch.nn.Module, samples: Rollout, rows: torch.Tensor,
                    owner: torch.Tensor, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                    entropy: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`token_logprobs` through training/packed.py: no compute on any token past a completion's
    end (those positions hold zeros)."""
    lay = packed.layout(owner, prompt_mask.sum(1), samples.completion_mask[rows].sum(1))
    completions = samples.completion_ids[rows]
    states = packed.hidden_states(body, prompt_ids, prompt_mask, completions, lay)
    chosen, entropies = chosen_logprobs(states, head, completions[:, :lay.width].reshape(-1)[lay.outputs], entropy)
    shape = (len(rows), samples.completion_ids.shape[1])

    def place(values: torch.Tensor) -> torch.Tensor:
        grid = values.new_zeros(len(rows) * lay.width).index_copy(0, lay.outputs, values)
        return torch.nn.functional.pad(grid.view(len(rows), lay.width), (0, shape[1] - lay.width))

    return place(chosen), (None if entropies is None else place(entropies))


def _output(out, head: torch.nn.Module | None) -> torch.Tensor:
    """What `chosen_logprobs` takes: the backbone's final hidden states, or the model's logits."""
    return out.logits if head is None else out.last_hidden_state


def checkpointed_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The layers transformers recomputes in the backward (`gradient_checkpointing_enable`)."""
    return [m for m in model.modules() if getattr(m, "gradient_checkpointing", False) is True]


def joint_logprobs(model: torch.nn.Module, samples: Rollout, rows: torch.Tensor, *,
                   entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`token_logprobs` as one forward over prompt + completion per row, without a KV cache: under
    gradient checkpointing (a recomputed layer cannot share a prompt cache) and for models whose
    prompt state is not keys and values (`shares_prompt_cache`). transformers only checkpoints
    layers in training mode: their own flag is set for the forward, so dropout elsewhere stays
    off as in every other forward of the trainer. A model that gives logits itself (no split
    head) forms them for the completion's positions only (`logits_to_keep`)."""
    body, head = split_head(model)
    prompt_ids, prompt_mask = _trim_left(samples.prompt_ids[rows], samples.prompt_mask[rows])
    full = samples.completion_ids.shape[1]
    width = max(1, int(samples.completion_mask[rows].sum(1).max()))  # no columns past every row's end
    completion, keep = samples.completion_ids[rows, :width], samples.completion_mask[rows, :width]
    mask = torch.cat([prompt_mask, torch.ones_like(keep)], dim=1)
    last = {"logits_to_keep": width + 1} if head is None and _takes_logits_to_keep(model) else {}
    layers = checkpointed_layers(model)
    for layer in layers:
        layer.training = True
    try:
        out = body(input_ids=torch.cat([prompt_ids, completion], dim=1), attention_mask=mask,
                   position_ids=positions(mask), use_cache=False, **last)
    finally:
        for layer in layers:
            layer.training = False
    states = _output(out, head)[:, -(width + 1):-1]
    logp, ent = chosen_logprobs(states, head, completion, entropy)
    def pad(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.pad(x * keep, (0, full - width))

    return pad(logp), (None if ent is None else pad(ent))


def _takes_logits_to_keep(model: torch.nn.Module) -> bool:
    """Whether the model's forward (a peft wrapper's base model's) can form only its last positions' logits."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "logits_to_keep" in inspect.signature(inner.forward).parameters


def _trim_left(ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop the leading columns that are padding in every row."""
    first = int(mask.any(0).long().argmax())
    return ids[:, first:], mask[:, first:]


@dataclass(frozen=True)
class LossParts:
    loss: torch.Tensor  # scalar, already divided by the normalizer
    clipped: float  # number of masked tokens where the clip was active
    entropy: float  # summed token entropy over masked tokens (0 when not computed)
    kl: float  # summed k3 over masked tokens


def tis_weights(trainer_logp: torch.Tensor, sampler_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated importance sampling (Yao et al. 2025, veRL's `tis_imp_ratio_cap`): per token
    min(exp(trainer_logp - sampler_logp), cap), the weight of a token another engine sampled
    (vLLM) in the trainer's policy gradient. No gradient flows through it; 1 where the two agree."""
    with torch.no_grad():
        return torch.exp(trainer_logp.detach().float() - sampler_logp.detach().float()).clamp(max=cap)


def ppo_clip_loss(
    logp: torch.Tensor,
    entropy: torch.Tensor | None,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float,
    eps_high: float,
    normalizer: float,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    entropy_coef: float = 0.0,
    is_weights: torch.Tensor | None = None,
) -> LossParts:
    """PPO-clip over tokens; per-token losses are summed and divided by a constant, so a
    rollout's weight does not depend on its length (no per-sequence averaging).
    `entropy` (R, T) is each token's entropy (None: not computed, reported as 0);
    `entropy_coef` > 0 subtracts coef * token entropy (the bonus, normalized alike);
    `is_weights` (R, T) multiply each token's policy-gradient term (`tis_weights`; None: 1),
    not the entropy bonus nor the KL term."""
    ratio = torch.exp(logp - old_logp)
    a = advantages[:, None]
    clipped_ratio = ratio.clamp(1 - eps_low, 1 + eps_high)
    per_token = -torch.min(ratio * a, clipped_ratio * a)
    if is_weights is not None:
        per_token = per_token * is_weights
    if entropy_coef:
        if entropy is None:
            raise ValueError("entropy_coef > 0 needs the token entropies (token_logprobs(..., entropy=True))")
        per_token = per_token - entropy_coef * entropy
    kl_sum = 0.0
    if ref_logp is not None:
        delta = ref_logp - logp
        k3 = torch.exp(delta) - delta - 1
        per_token = per_token + kl_coef * k3
        kl_sum = float((k3.detach() * mask).sum())
    loss = (per_token * mask).sum() / normalizer
    with torch.no_grad():
        active = ((ratio * a) > (clipped_ratio * a)).float()
        entropy_sum = 0.0 if entropy is None else float((entropy.detach() * mask).sum())
    return LossParts(loss, float((active * mask).sum()), entropy_sum, kl_sum)
