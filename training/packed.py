"""A padding-free forward of Llama- and Qwen2-style models over a step's prompts and completions.

    states, layout = packed.hidden_states(backbone, prompt_ids, prompt_mask, owner, completions, lengths)

Each distinct prompt is encoded once (its keys and values shared by its rollouts, so their
gradients add up); the completions' tokens are packed into one sequence holding no column
past any completion's end, and every projection, norm and MLP runs over those real tokens
only. Attention alone lays the tokens back out as rows (prompt keys + the row's own causal
keys), where padding costs little. The arithmetic is the model's own: it calls the
model's modules (embedding, norms, projections, MLPs, rotary embedding) and writes out only
the glue of its decoder layer, so `supports` admits just the layer variants reproduced here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from evo.policies.fastlm import LLAMA_LIKE
from evo.policies.fastlm import supports as fastlm_supports


def supports(model: torch.nn.Module) -> bool:
    """Llama / Qwen2 decoder layers as transformers writes them (default rotary embedding, SiLU
    MLP, no sliding window, no attention dropout), without adapters around their layers."""
    cfg = model.config
    return (cfg.model_type in LLAMA_LIKE and fastlm_supports(model)
            and not getattr(cfg, "attention_dropout", 0.0))


@dataclass(frozen=True)
class Layout:
    """Where the packed tokens sit. Rows are the rollouts, `owner[r]` their prompt; the inputs of
    row r are its first lengths[r] - 1 completion tokens (the last one predicts nothing)."""

    owner: torch.Tensor  # (R,) prompt index of each row
    inputs: torch.Tensor  # (N,) flat index of each packed input into the (R, width - 1) grid
    outputs: torch.Tensor  # (sum lengths,) flat index into the (R, width) grid of every predicted token
    sources: torch.Tensor  # (sum lengths,) its state: r < R the prompt's last state of row r, else packed input - R
    positions: torch.Tensor  # (N,) position id of each packed input
    width: int  # longest completion (at least 1)


def layout(owner: torch.Tensor, prompt_lengths: torch.Tensor, lengths: torch.Tensor) -> Layout:
    """The packing of rows with these completion lengths (each counted as at least 1) after
    prompts of these lengths (pure index arithmetic)."""
    lengths = lengths.clamp(min=1)
    rows, width = len(lengths), int(lengths.max())
    step = torch.arange(width, device=lengths.device)
    inputs = (step[None, : width - 1] < (lengths - 1)[:, None]).reshape(-1).nonzero()[:, 0]
    outputs = (step[None, :] < lengths[:, None]).reshape(-1).nonzero()[:, 0]
    row, column = outputs // width, outputs % width
    # output (r, j >= 1) is predicted from input (r, j - 1), the k-th packed input
    grid = torch.full((rows * max(width - 1, 1),), -1, dtype=torch.long, device=lengths.device)
    grid[inputs] = torch.arange(len(inputs), device=lengths.device)
    sources = torch.where(column == 0, row, rows + grid[(row * (width - 1) + column - 1).clamp(min=0)])
    positions = prompt_lengths[owner].repeat_interleave(lengths - 1) + (inputs % max(width - 1, 1))
    return Layout(owner, inputs, outputs, sources, positions, width)


def hidden_states(body: torch.nn.Module, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                  completions: torch.Tensor, lay: Layout) -> torch.Tensor:
    """The final (normed) hidden state of every predicted token, in `lay.outputs` order:
    (sum lengths, H). `body` is the model's backbone (embed_tokens, layers, rotary_emb, norm);
    `prompt_ids` / `prompt_mask` are the distinct prompts, left-padded; `completions` (R, >= width)."""
    rows, gap = len(lay.owner), max(lay.width - 1, 1)
    prompt_positions = (prompt_mask.long().cumsum(-1) - 1).clamp(min=0)
    x = body.embed_tokens(prompt_ids)  # (U, P, H)
    y = body.embed_tokens(completions[:, :gap].reshape(-1)[lay.inputs])  # (N, H)
    cos, sin = body.rotary_emb(x, prompt_positions)
    rope_x = cos.unsqueeze(2), sin.unsqueeze(2)  # (U, P, 1, D)
    cos, sin = body.rotary_emb(y[None], lay.positions[None])
    rope_y = cos[0].unsqueeze(1), sin[0].unsqueeze(1)  # (N, 1, D)
    prompt_keys, own_keys = _masks(prompt_mask, lay.owner, gap)
    for layer in body.layers:
        attention = layer.self_attn
        q, k, v = _projected(attention, layer.input_layernorm(x), rope_x)  # (U, P, heads, D)
        x = x + attention.o_proj(_attend(q, k, v, prompt_keys).flatten(-2))
        x = x + layer.mlp(layer.post_attention_layernorm(x))
        if len(lay.inputs):
            cq, ck, cv = (_rows(t, lay, rows, gap) for t in _projected(attention, layer.input_layernorm(y), rope_y))
            keys = torch.cat([k.index_select(0, lay.owner), ck], dim=1)
            values = torch.cat([v.index_select(0, lay.owner), cv], dim=1)
            out = _attend(cq, keys, values, own_keys).flatten(-2).reshape(rows * gap, -1).index_select(0, lay.inputs)
            y = y + attention.o_proj(out)
            y = y + layer.mlp(layer.post_attention_layernorm(y))
    last = body.norm(x[:, -1]).index_select(0, lay.owner)  # (R, H)
    return torch.cat([last, body.norm(y)]).index_select(0, lay.sources)


def _projected(attention: torch.nn.Module, x: torch.Tensor,
               rope: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v (..., heads, D) of normed states x (..., H), rotary applied to q and k."""
    d = attention.head_dim
    q, k, v = (p(x).unflatten(-1, (-1, d)) for p in (attention.q_proj, attention.k_proj, attention.v_proj))
    cos, sin = rope
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin, v


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def _rows(t: torch.Tensor, lay: Layout, rows: int, gap: int) -> torch.Tensor:
    """Packed (N, heads, D) laid out as rows (R, gap, heads, D), zeros past each row's end."""
    return t.new_zeros((rows * gap, *t.shape[1:])).index_copy(0, lay.inputs, t).unflatten(0, (rows, gap))


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Scaled dot-product attention over (B, L, heads, D) tensors; returns (B, L, heads, D)."""
    grouped = k.shape[2] != q.shape[2]
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         attn_mask=mask, enable_gqa=grouped)
    return out.transpose(1, 2)


def _masks(prompt_mask: torch.Tensor, owner: torch.Tensor, gap: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean attention masks (B, 1, queries, keys): the prompts' causal mask over their real
    tokens (a padded query sees itself, so no row is empty), and each row's completion queries
    over its prompt's real tokens and its own earlier tokens."""
    width, device = prompt_mask.shape[1], prompt_mask.device
    real = prompt_mask.bool()
    causal = torch.ones(width, width, dtype=torch.bool, device=device).tril()
    prompt = causal[None] & real[:, None, :] | torch.eye(width, dtype=torch.bool, device=device)[None]
    own = torch.ones(gap, gap, dtype=torch.bool, device=device).tril()
    rows = torch.cat([real[owner][:, None, :].expand(-1, gap, -1), own[None].expand(len(owner), -1, -1)], dim=2)
    return prompt[:, None], rows[:, None]
