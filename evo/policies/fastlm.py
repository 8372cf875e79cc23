"""A lean decoding forward for Llama-, Qwen2- and GPT-2-style models, reading the HF model's weights.

Used by the Sampler when the model is one of these (the HF forward otherwise). Per layer and
token: one fused q/k/v projection, a write into a preallocated KV cache, one attention call,
one output projection, one fused MLP input — no cache concatenation, no mask rebuilding, no
per-module Python. Weights are fused when a
`FastLM` is built (one per sampling call), so a model being trained is always read fresh.
"""

from __future__ import annotations

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


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def _decode_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Attention of one new query per row (B, heads, 1, D) over the cache (B, kv_heads, L, D),
    the heads sharing a kv head batched together: two batched matrix products that read the
    cache once (scaled_dot_product_attention's CPU kernel is 1.5-3x slower at one query)."""
    rows, heads, _, dim = q.shape
    groups = heads // keys.shape[1]
    scores = torch.matmul(q.reshape(rows, keys.shape[1], groups, dim), keys.transpose(-1, -2)) * dim ** -0.5
    if mask is not None:  # (B, 1, 1, L): False on padded prompt positions
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1, dtype=torch.float32).to(values.dtype), values).reshape(rows, heads, 1, dim)


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
            self.layers = [self._llama_layer(b) if self.llama else self._gpt2_layer(b, cfg) for b in self._blocks(model)]
        self.model = model
        param = next(model.parameters())
        shape = (len(self.layers), rows, self.kv_heads, length, self.head_dim)
        self.keys = torch.zeros(shape, dtype=param.dtype, device=param.device)
        self.values = torch.zeros(shape, dtype=param.dtype, device=param.device)
        self.key_mask: torch.Tensor | None = None  # [rows, length] bool, None when nothing is padded

    @staticmethod
    def _blocks(model):
        return model.model.layers if model.config.model_type in LLAMA_LIKE else model.transformer.h

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
            self.key_mask = torch.ones(self.keys.shape[1], self.keys.shape[3], dtype=torch.bool, device=ids.device)
            self.key_mask[:, :width] = ~pad.repeat_interleave(repeat, 0)
        causal = torch.ones(width, width, dtype=torch.bool, device=ids.device).tril()
        # A padded query sees itself, so no row of the attention is empty (no NaN in the cache).
        attn = causal[None] & ~pad[:, None, :] | torch.eye(width, dtype=torch.bool, device=ids.device)[None]
        hidden = self._forward(ids, positions, attn[:, None], slice(0, width), repeat)
        return self._logits(hidden[:, -1])

    def select(self, keep: torch.Tensor) -> None:
        """Keep only these batch rows (finished rows leave the batch)."""
        self.keys, self.values = self.keys[:, keep], self.values[:, keep]
        if self.key_mask is not None:
            self.key_mask = self.key_mask[keep]

    def step(self, tokens: torch.Tensor, positions: torch.Tensor, slot: int) -> torch.Tensor:
        """One new token per row [B] at cache slot `slot`; return logits [B, V]."""
        attn = None if self.key_mask is None else self.key_mask[:, None, None, : slot + 1]
        hidden = self._forward(tokens[:, None], positions[:, None], attn, slice(slot, slot + 1), 1)
        return self._logits(hidden[:, -1])

    def _forward(self, ids, positions, attn, slots: slice, repeat: int) -> torch.Tensor:
        x, rope = self._embed(ids, positions)
        rows, length = x.shape[0], x.shape[1]
        h, kvh, hd = self.heads, self.kv_heads, self.head_dim
        for i, layer in enumerate(self.layers):
            y = self._norm(x, layer.norm1)
            qkv = F.linear(y, layer.qkv_w, layer.qkv_b).view(rows, length, -1, hd).transpose(1, 2)
            q, k, v = qkv[:, :h], qkv[:, h:h + kvh], qkv[:, h + kvh:h + 2 * kvh]
            if rope is not None:
                cos, sin = rope
                q = q * cos + _rotate_half(q) * sin
                k = k * cos + _rotate_half(k) * sin
            keys, values = self._store(i, k, v, slots, repeat)
            if slots.start == 0:  # prefill: attend within the prompt rows themselves
                keys, values = k, v
            out = (_decode_attention(q, keys, values, attn) if length == 1 and slots.start > 0
                   else F.scaled_dot_product_attention(q, keys, values, attn_mask=attn, enable_gqa=kvh != h))
            x = x + F.linear(out.transpose(1, 2).reshape(rows, length, h * hd), layer.out_w, layer.out_b)
            x = x + self._mlp(self._norm(x, layer.norm2), layer)
        return x

    def _store(self, i: int, k, v, slots: slice, repeat: int):
        if repeat > 1:
            k, v = k.repeat_interleave(repeat, 0), v.repeat_interleave(repeat, 0)
        self.keys[i, :, :, slots] = k
        self.values[i, :, :, slots] = v
        return self.keys[i, :, :, : slots.stop], self.values[i, :, :, : slots.stop]

    def _embed(self, ids, positions):
        if self.llama:
            x = self.model.model.embed_tokens(ids)
            cos, sin = self.model.model.rotary_emb(x, positions)
            return x, (cos[:, None].to(x.dtype), sin[:, None].to(x.dtype))
        tr = self.model.transformer
        return tr.wte(ids) + tr.wpe(positions), None

    def _norm(self, x, norm):
        weight, bias, eps = norm
        if self.llama:
            return F.rms_norm(x, (x.shape[-1],), weight, eps)
        return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)

    def _mlp(self, x, layer: _Layer) -> torch.Tensor:
        up = F.linear(x, layer.up_w, layer.up_b)
        if self.llama:
            gate, up = up.chunk(2, dim=-1)
            up = F.silu(gate) * up
        else:
            up = F.gelu(up, approximate="tanh")
        return F.linear(up, layer.down_w, layer.down_b)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        final = self.model.model.norm if self.llama else self.model.transformer.ln_f
        norm = (final.weight, None, final.variance_epsilon) if self.llama else (final.weight, final.bias, final.eps)
        return self.model.lm_head(self._norm(x, norm))
