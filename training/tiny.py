"""Tiny causal LMs trained from scratch: a shared character tokenizer and sized configs.

Every task uses the same alphabet (printable ASCII plus newline), so one tokenizer file fits
all checkpoints. `save` writes a plain `save_pretrained` directory that `AutoModelForCausalLM`
and `vllm serve` load unchanged (in this project: `training.models.load`, or
`evo.policies.local.load_causal_lm` without the training options). Load its tokenizer with
`evo.policies.local.load_tokenizer`: transformers 5's `AutoTokenizer` rebuilds a qwen2
checkpoint's as a `Qwen2Tokenizer`, which loses the spaces and line breaks of the character
vocabulary ("a b\nc" comes back as "abc").

    tok = char_tokenizer()
    model = new_model("nano", "llama", tok)
    save(model, tok, "ckpt/")
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    LlamaConfig,
    Qwen2Config,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)

# Full-width bars: no ASCII text can spell a special token.
PAD, BOS, EOS, UNK = "<｜pad｜>", "<｜bos｜>", "<｜eos｜>", "<｜unk｜>"
SPECIALS = (PAD, BOS, EOS, UNK)  # ids 0, 1, 2, 3
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(4)
ALPHABET = "\n" + "".join(chr(c) for c in range(32, 127))  # newline + printable ASCII
ARCHS = ("llama", "gpt2", "qwen2")


@dataclass(frozen=True)
class TinySize:
    d_model: int
    n_layer: int
    n_head: int  # head_dim = d_model / n_head = 64, a size every vLLM CPU attention backend takes
    d_ff: int  # llama MLP width (gpt2 uses 4 * d_model)


SIZES: dict[str, TinySize] = {
    "nano": TinySize(d_model=128, n_layer=4, n_head=2, d_ff=512),  # ~1.06M parameters
    "nano8": TinySize(d_model=128, n_layer=4, n_head=8, d_ff=512),  # nano with 8 heads of 16 (maze-notes warm-up)
    "micro": TinySize(d_model=256, n_layer=6, n_head=4, d_ff=704),  # ~4.8-5.3M parameters
    "small": TinySize(d_model=512, n_layer=8, n_head=8, d_ff=1408),  # ~25M parameters (scripts/gpu_check.sh)
}
DEFAULT_CONTEXT = 2048


def char_tokenizer() -> PreTrainedTokenizerFast:
    """The character-level tokenizer: one token per character, `<bos>` prepended, left padding."""
    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    vocab.update({ch: len(SPECIALS) + i for i, ch in enumerate(ALPHABET)})
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, BOS_ID)]
    )
    core.add_special_tokens(list(SPECIALS))
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        padding_side="left",
        clean_up_tokenization_spaces=False,
        model_max_length=DEFAULT_CONTEXT,
    )


def _vocab_size(vocab: int | PreTrainedTokenizerFast | None) -> int:
    if vocab is None:
        return len(SPECIALS) + len(ALPHABET)
    return vocab if isinstance(vocab, int) else len(vocab)


def config(size: str = "nano", arch: str = "llama", vocab: int | PreTrainedTokenizerFast | None = None,
           *, context: int = DEFAULT_CONTEXT) -> GPT2Config | LlamaConfig | Qwen2Config:
    """A transformers config for a named size ("nano", "micro") and architecture ("llama", "gpt2")."""
    if size not in SIZES:
        raise ValueError(f"unknown tiny size {size!r}; known: {', '.join(SIZES)}")
    if arch not in ARCHS:
        raise ValueError(f"unknown tiny arch {arch!r}; known: {', '.join(ARCHS)}")
    s, v = SIZES[size], _vocab_size(vocab)
    ids = dict(bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID, tie_word_embeddings=True)
    if arch == "gpt2":
        return GPT2Config(vocab_size=v, n_positions=context, n_embd=s.d_model, n_layer=s.n_layer,
                          n_head=s.n_head, n_inner=4 * s.d_model, resid_pdrop=0.0, embd_pdrop=0.0,
                          attn_pdrop=0.0, **ids)
    if arch == "qwen2":  # Llama with q/k/v biases and grouped key/value heads, as Qwen2.5
        return Qwen2Config(vocab_size=v, hidden_size=s.d_model, intermediate_size=s.d_ff,
                           num_hidden_layers=s.n_layer, num_attention_heads=s.n_head,
                           num_key_value_heads=max(1, s.n_head // 2), max_position_embeddings=context,
                           rope_theta=10000.0, use_sliding_window=False, **ids)
    return LlamaConfig(vocab_size=v, hidden_size=s.d_model, intermediate_size=s.d_ff,
                       num_hidden_layers=s.n_layer, num_attention_heads=s.n_head,
                       num_key_value_heads=s.n_head, max_position_embeddings=context,
                       rope_theta=10000.0, **ids)


def new_model(size: str = "nano", arch: str = "llama", vocab: int | PreTrainedTokenizerFast | None = None,
              *, context: int = DEFAULT_CONTEXT, seed: int = 0) -> PreTrainedModel:
    """A freshly initialised float32 causal LM in eval mode, no dropout, deterministic per seed."""
    cfg = config(size, arch, vocab, context=context)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.generation_config.pad_token_id = PAD_ID
    model.generation_config.bos_token_id = BOS_ID
    model.generation_config.eos_token_id = EOS_ID
    return model.eval()


def param_count(model: torch.nn.Module) -> int:
    """Number of distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in model.parameters())


def save(model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, out_dir: str | Path) -> Path:
    """Write a `save_pretrained` directory (config, safetensors weights, tokenizer files)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out
