"""Peak memory of one update (log-probs, PPO-clip loss, backward) at a 151,936-token vocabulary:
the trainer's loss now, the one before it (every token's float32 log-softmax kept, entropy
always), and TRL's (`selective_log_softmax` over the model's logits), at the same shapes.

A tiny hidden size (64, two layers, Qwen2 layout) keeps the model small, so the figure is the
vocabulary's share: the (rows, tokens, vocabulary) tensors. Each variant runs in a fresh
process on one CPU thread with glibc's mmap threshold at 64 KiB (a freed tensor leaves the
resident set at once), and its figure is that process's peak resident memory during the
update minus its resident memory just before it (psutil / getrusage, in MiB).

    python tests/benchmarks/bench_update_memory.py [--rows 16] [--tokens 64] [--vocab 151936]

The last line is JSON: {"name": "update_memory", "before_mib": ..., "after_mib": ..., "trl_mib": ...,
"after_vs_before": ..., "after_vs_trl": ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import types
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
BEFORE = "1e2f708"  # the last commit whose loss formed the (rows, T, V) tensors
VARIANTS = ("before", "after", "trl")


def rss_mib() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def setup(rows: int, tokens: int, vocab: int):
    """A Qwen2-layout model of the real vocabulary and a fixed rollout of `rows` x `tokens`."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from evo.policies.sampler import Rollout
    from training import tiny

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                         tie_word_embeddings=True, use_sliding_window=False, pad_token_id=tiny.PAD_ID)
    model = Qwen2ForCausalLM(config).eval()
    group, prompt = 8, 32
    prompt_ids = torch.randint(4, vocab, (rows // group, prompt)).repeat_interleave(group, 0)
    completion = torch.randint(4, vocab, (rows, tokens))
    ones = torch.ones_like(completion)
    samples = Rollout(prompt_ids, torch.ones_like(prompt_ids), completion, ones, torch.zeros(rows, tokens),
                      [[None] * group for _ in range(rows // group)])
    return model, samples


def clip(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The PPO-clip loss at ratio 1 with advantages +-1 (what each variant backpropagates)."""
    advantages = torch.ones(logp.shape[0]).index_fill(0, torch.arange(0, logp.shape[0], 2), -1.0)[:, None]
    ratio = torch.exp(logp - logp.detach())
    return -(torch.min(ratio * advantages, ratio.clamp(0.8, 1.2) * advantages) * mask).sum() / mask.numel()


def run_before(model, samples) -> None:
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{BEFORE}:training/loss.py"], capture_output=True,
                            text=True, check=True).stdout
    old = sys.modules["old_loss"] = types.ModuleType("old_loss")
    exec(compile(source, "old_loss.py", "exec"), old.__dict__)  # noqa: S102 - this repository's own past code
    rows = torch.arange(samples.completion_ids.shape[0])
    logp, all_logp = old.token_logprobs(model, samples, rows)
    mask = samples.completion_mask.float()
    parts = old.ppo_clip_loss(logp, all_logp, logp.detach(), torch.ones(len(rows)), mask, eps_low=0.2, eps_high=0.2,
                              normalizer=float(mask.numel()))
    parts.loss.backward()


def run_after(model, samples) -> None:
    from training.loss import ppo_clip_loss, token_logprobs

    rows = torch.arange(samples.completion_ids.shape[0])
    logp, entropy = token_logprobs(model, samples, rows)
    mask = samples.completion_mask.float()
    parts = ppo_clip_loss(logp, entropy, logp.detach(), torch.ones(len(rows)), mask, eps_low=0.2, eps_high=0.2,
                          normalizer=float(mask.numel()))
    parts.loss.backward()


def run_trl(model, samples) -> None:
    """GRPOTrainer's `_get_per_token_logps_and_entropies` path: the model's logits for the
    completion positions, then TRL's `selective_log_softmax` (no entropy)."""
    from trl.trainer.utils import selective_log_softmax

    ids = torch.cat([samples.prompt_ids, samples.completion_ids], dim=1)
    mask = torch.cat([samples.prompt_mask, samples.completion_mask], dim=1)
    tokens = samples.completion_ids.shape[1]
    logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=tokens + 1).logits[:, :-1]
    logp = selective_log_softmax(logits, samples.completion_ids)
    clip(logp, samples.completion_mask.float()).backward()


def child(variant: str, rows: int, tokens: int, vocab: int) -> None:
    torch.set_num_threads(1)
    model, samples = setup(rows, tokens, vocab)
    base, high = rss_mib(), peak_mib()
    {"before": run_before, "after": run_after, "trl": run_trl}[variant](model, samples)
    peak = peak_mib()
    print(json.dumps({"variant": variant, "update_mib": round(peak - base, 1), "setup_peak_mib": round(high, 1),
                      "base_mib": round(base, 1)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16, help="rollouts in the micro-batch (a multiple of 8)")
    parser.add_argument("--tokens", type=int, default=64, help="completion tokens per rollout")
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        return child(args.variant, args.rows, args.tokens, args.vocab)
    figures = {"name": "update_memory", "rows": args.rows, "tokens": args.tokens, "vocab": args.vocab,
               "rtv_float32_mib": round(args.rows * args.tokens * args.vocab * 4 / 2**20, 1)}
    # large blocks straight from mmap, so a freed tensor leaves the resident set at once and the
    # peak measures live tensors, not what glibc's heap kept from earlier ones
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
    for variant in VARIANTS:
        out = subprocess.run([sys.executable, __file__, "--variant", variant, "--rows", str(args.rows), "--tokens",
                              str(args.tokens), "--vocab", str(args.vocab)], capture_output=True, text=True, env=env)
        if out.returncode:
            raise SystemExit(f"{variant} failed:\n{out.stderr[-2000:]}")
        row = json.loads(out.stdout.strip().splitlines()[-1])
        if row["setup_peak_mib"] > row["base_mib"] + row["update_mib"]:
            print(f"warning: {variant}'s setup peaked higher than its update; the figure is a lower bound", file=sys.stderr)
        figures[f"{variant}_mib"] = row["update_mib"]
        print(f"{variant:6s}: {row['update_mib']:8.1f} MiB above the {row['base_mib']:.0f} MiB before the update")
    figures["after_vs_before"] = round(figures["after_mib"] / figures["before_mib"], 3)
    figures["after_vs_trl"] = round(figures["after_mib"] / figures["trl_mib"], 3)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
