"""A lean decoding forward for Llama-, Qwen2- and GPT-2-style models, reading the HF model's weights.

Used by the Sampler when the model is one of these (the HF forward otherwise). Per layer and
token: one fused q/k/v projection (the attention scale folded into its q rows), rotary positions
on q and k together in four operations, one write of k and v into a preallocated cache, one
attention call, one output projection, one fused MLP input: no cache concatenation, no mask
rebuilding, no per-module Python. A decode step is launch-bound on a GPU (a 1.5B model reads
3 GB of weights a step against some 500 operations), so every operation a layer saves is time:
tests/benchmarks/bench_decode_overhead.py counts them. Weights are fused when a `FastLM` is
built (one per sampling call), so a model being trained is always read fresh.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F


LLAMA_LIKE = ("llama", "qwen2")  # RMSNorm, rotary positions, gated SiLU MLP, model.model.layers


@dataclass(frozen=True)
class _Layer:
    norm1: tuple  # (weight, bias|None, eps)
    qkv_w: torch.Tensor  # [out, d]: q, k, v stacked
    qkv_b: torch.Tensor | None
    out_w: torch.Tensor
    out_b: torch.Tensor | None
    norm2: tuple
    up_w: torch.Tensor  # llama: gate and up stacked; gpt2: c_fc
    up_b: torch.Tensor | None
    down_w: torch.Tensor
    down_b: torch.Tensor | None


def supports(model: torch.nn.Module) -> bool:
    """True for the architectures this module reproduces exactly (not with adapters wrapped around
    their layers, such as peft's LoRA: it would sample from the base weights)."""
    if hasattr(model, "peft_config"):
        return False
    cfg = model.config
    if cfg.model_type in LLAMA_LIKE:
        rope = getattr(cfg, "rope_parameters", None) or {}
        plain = (cfg.hidden_act == "silu" and rope.get("rope_type", "default") == "default"
                 and getattr(cfg, "pretraining_tp", 1) == 1)
        if cfg.model_type == "qwen2":  # Llama with q/k/v biases; sliding-window layers are not reproduced
            return plain and not getattr(cfg, "use_sliding_window", False)
        return plain and not cfg.mlp_bias
    if cfg.model_type == "gpt2":
        return (cfg.activation_function in ("gelu_new", "gelu_pytorch_tanh") and cfg.scale_attn_weights
                and not cfg.scale_attn_by_inverse_layer_idx and not cfg.reorder_and_upcast_attn)
    return False


def _rotate(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> None:
    """Rotary positions in place: x * cos + rotate_half(x) * sin, where rotate_half(x) (the halves
    swapped, the first negated) is x rolled by half its width times a sign folded into the sine:
    the same products and sum, so the same values, in four operations instead of five."""
    rolled = x.roll(x.shape[-1] // 2, -1).mul_(signed_sin)
    x.mul_(cos).add_(rolled)


def _decode_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, padded: torch.Tensor | None) -> torch.Tensor:
    """Attention of one new, already scaled query per row (B, heads, 1, D) over the cache
    (B, kv_heads, L, D), the heads sharing a kv head batched together: two batched matrix
    products that read the cache once (scaled_dot_product_attention's CPU kernel is 1.5-3x
    slower at one query)."""
    rows, heads, _, dim = q.shape
    groups = heads // keys.shape[1]
    scores = torch.matmul(q.reshape(rows, keys.shape[1], groups, dim), keys.transpose(-1, -2))
    if padded is not None:  # (B, 1, 1, L): True on padded prompt positions
        scores.masked_fill_(padded, float("-inf"))
    # in a half dtype the softmax still sums in float32 (and rounds its output once)
    return torch.matmul(scores.softmax(-1), values).reshape(rows, heads, 1, dim)


def _residual(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x + y @ weight.T (+ bias), all 2-D: without a bias, one matrix product that adds x as it writes (a
    half dtype rounds once instead of twice; float32 sums in another order, within 1e-6)."""
    if bias is not None:
        return x + F.linear(y, weight, bias)
    return torch.addmm(x, y, weight.t())


class FastLM:
    """Prefill + one-token steps over a static KV cache of `rows` x `length` positions."""

    def __init__(self, model: torch.nn.Module, rows: int, length: int) -> None:
        cfg = model.config
        self.llama = cfg.model_type in LLAMA_LIKE
        self.heads = cfg.num_attention_heads if self.llama else cfg.n_head
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        d = cfg.hidden_size if self.llama else cfg.n_embd
        self.head_dim = getattr(cfg, "head_dim", None) or d // self.heads
        with torch.no_grad():
            layers = [self._llama_layer(b) if self.llama else self._gpt2_layer(b, cfg) for b in self._blocks(model)]
            self.layers = [self._scaled(layer) for layer in layers]
        self.model = model
        param = next(model.parameters())
        # keys and values of every layer in one tensor, so one copy stores both
        self.cache = torch.zeros((len(self.layers), 2, rows, self.kv_heads, length, self.head_dim),
                                 dtype=param.dtype, device=param.device)
        self.padded: torch.Tensor | None = None  # [rows, 1, 1, length] True on padded prompt positions
        if self.llama:
            half = self.head_dim // 2
            self.sign = torch.cat([-torch.ones(half), torch.ones(half)]).to(param.device, param.dtype)

    @staticmethod
    def _blocks(model):
        return model.model.layers if model.config.model_type in LLAMA_LIKE else model.transformer.h

    def _scaled(self, layer: _Layer) -> _Layer:
        """The layer with the attention scale 1/sqrt(head_dim) folded into its q rows (in float32,
        rounded once; exact when head_dim is a power of 4), so no step scales the scores."""
        scale = torch.ones(layer.qkv_w.shape[0], device=layer.qkv_w.device)
        scale[: self.heads * self.head_dim] = self.head_dim ** -0.5

        def fold(t: torch.Tensor) -> torch.Tensor:
            return (t.float() * (scale if t.dim() == 1 else scale[:, None])).to(t.dtype)

        return dataclasses.replace(layer, qkv_w=fold(layer.qkv_w), qkv_b=None if layer.qkv_b is None else fold(layer.qkv_b))

    def _llama_layer(self, block) -> _Layer:
        att, mlp = block.self_attn, block.mlp
        projections = (att.q_proj, att.k_proj, att.v_proj)
        qkv = torch.cat([p.weight for p in projections])
        qkv_b = torch.cat([p.bias for p in projections]) if att.q_proj.bias is not None else None
        def norm(m):
            return m.weight, None, m.variance_epsilon

        return _Layer(norm(block.input_layernorm), qkv, qkv_b, att.o_proj.weight, att.o_proj.bias,
                      norm(block.post_attention_layernorm), torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]),
                      None, mlp.down_proj.weight, None)

    @staticmethod
    def _gpt2_layer(block, cfg) -> _Layer:
        def norm(m):
            return m.weight, m.bias, m.eps

        att, mlp = block.attn, block.mlp
        return _Layer(norm(block.ln_1), att.c_attn.weight.t().contiguous(), att.c_attn.bias,
                      att.c_proj.weight.t().contiguous(), att.c_proj.bias, norm(block.ln_2),
                      mlp.c_fc.weight.t().contiguous(), mlp.c_fc.bias, mlp.c_proj.weight.t().contiguous(), mlp.c_proj.bias)

    def prefill(self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, repeat: int) -> torch.Tensor:
        """Run the prompts [B0, P]; store their cache for B0 * repeat rows; return last logits [B0, V]."""
        width = ids.shape[1]
        pad = mask == 0
        if bool(pad.any()):
            self.padded = torch.zeros(self.cache.shape[2], 1, 1, self.cache.shape[4], dtype=torch.bool, device=ids.device)
            self.padded[:, 0, 0, :width] = pad.repeat_interleave(repeat, 0)
        causal = torch.ones(width, width, dtype=torch.bool, device=ids.device).tril()
        # A padded query sees itself, so no row of the attention is empty (no NaN in the cache).
        attn = causal[None] & ~pad[:, None, :] | torch.eye(width, dtype=torch.bool, device=ids.device)[None]
        return self._logits(self._forward(ids, positions, attn[:, None], 0, repeat))

    def select(self, keep: torch.Tensor) -> None:
        """Keep only these batch rows (finished rows leave the batch)."""
        self.cache = self.cache[:, :, keep]
        if self.padded is not None:
            self.padded = self.padded[keep]

    def step(self, tokens: torch.Tensor, positions: torch.Tensor, slot: int) -> torch.Tensor:
        """One new token per row [B] at cache slot `slot`; return logits [B, V]."""
        padded = None if self.padded is None else self.padded[..., : slot + 1]
        return self._logits(self._forward(tokens[:, None], positions[:, None], padded, slot, 1))

    def _forward(self, ids, positions, attn, start: int, repeat: int) -> torch.Tensor:
        """The last position's hidden state [B, d] after the layers over `ids` [B, length], whose
        keys and values go to cache slots start..start+length; `attn` is the prefill's mask (True =
        attend) or a step's padding (True = masked)."""
        x, rope = self._embed(ids, positions)
        rows, length = ids.shape
        h, kvh, hd = self.heads, self.kv_heads, self.head_dim
        x = x.flatten(0, 1)  # [B * length, d]: every projection one 2-D matrix product
        for layer, cache in zip(self.layers, self.cache):
            qkv = F.linear(self._norm(x, layer.norm1), layer.qkv_w, layer.qkv_b).view(rows, length, -1, hd).transpose(1, 2)
            if rope is not None:
                _rotate(qkv[:, :h + kvh], *rope)
            q, kv = qkv[:, :h], qkv[:, h:].unflatten(1, (2, kvh)).transpose(0, 1)  # kv: [2, B, kv_heads, length, D]
            cache.narrow(3, start, length).copy_(kv.repeat_interleave(repeat, 1) if repeat > 1 else kv)
            if start == 0:  # prefill: attend within the prompt rows themselves
                out = F.scaled_dot_product_attention(q, kv[0], kv[1], attn_mask=attn, scale=1.0, enable_gqa=kvh != h)
            else:
                keys, values = cache.narrow(3, 0, start + length).unbind(0)
                out = _decode_attention(q, keys, values, attn)
            x = _residual(x, out.transpose(1, 2).reshape(rows * length, h * hd), layer.out_w, layer.out_b)
            x = _residual(x, self._mlp_hidden(self._norm(x, layer.norm2), layer), layer.down_w, layer.down_b)
        return x.view(rows, length, -1)[:, -1]

    def _embed(self, ids, positions):
        if self.llama:
            x = self.model.model.embed_tokens(ids)
            cos, sin = self.model.model.rotary_emb(x, positions)
            return x, (cos[:, None].to(x.dtype), (sin[:, None] * self.sign).to(x.dtype))
        tr = self.model.transformer
        return tr.wte(ids) + tr.wpe(positions), None

    def _norm(self, x, norm):
        weight, bias, eps = norm
        if self.llama:
            return F.rms_norm(x, (x.shape[-1],), weight, eps)
        return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)

    def _mlp_hidden(self, x, layer: _Layer) -> torch.Tensor:
        """The MLP's activations, before its down projection."""
        up = F.linear(x, layer.up_w, layer.up_b)
        if self.llama:
            gate, up = up.chunk(2, dim=-1)
            return F.silu(gate) * up
        return F.gelu(up, approximate="tanh")

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        final = self.model.model.norm if self.llama else self.model.transformer.ln_f
        norm = (final.weight, None, final.variance_epsilon) if self.llama else (final.weight, final.bias, final.eps)
        return self.model.lm_head(self._norm(x, norm))
