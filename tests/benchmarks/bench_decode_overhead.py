"""Per-token overhead of the `local:` sampler's decode step against transformers' `generate`, on a
model of Qwen2.5-1.5B's layer layout (28 layers, 12 query heads over 2 key/value heads, q/k/v
biases) shrunk to a hidden size of 96, so that the work per step is dispatch, not arithmetic.

On a GPU, decoding a 1.5B model at a batch of 128 is launch-bound (about 3 GB of weights read per
step against some 800 kernel launches), so the count of device operations per step and the CPU
time per step of this narrow model are the figures that move the GPU's tokens/s; this benchmark
measures both on the CPU, paired in one process (the GPU figure itself is `scripts/gpu_accept.sh`'s
`sampler_vs_generate`).

    python tests/benchmarks/bench_decode_overhead.py [--quick] [--rows 16] [--new-tokens 64]

Prints, per side: aten calls per decode step made from Python (all, and those that are not
views; counted by the profiler over a whole call, divided by the tokens), and milliseconds per
decode step (median and range over interleaved repeats, one thread). The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import Qwen2Config, Qwen2ForCausalLM

from evo.policies.sampler import Sampler
from training import tiny

# aten calls that only make a view of their input: a Python call, no kernel on a GPU
VIEWS = {"aten::" + name for name in (
    "view", "reshape", "_reshape_alias", "as_strided", "slice", "select", "narrow", "transpose", "t", "expand",
    "permute", "unsqueeze", "squeeze", "unflatten", "flatten", "_unsafe_view", "alias", "detach", "detach_",
    "chunk", "split", "unbind", "view_as", "expand_as", "split_with_sizes", "lift_fresh", "resolve_conj",
    "resolve_neg")}


def narrow_qwen(layers: int, heads: int, kv_heads: int, head_dim: int, vocab: int) -> Qwen2ForCausalLM:
    config = Qwen2Config(vocab_size=vocab, hidden_size=heads * head_dim, intermediate_size=4 * heads * head_dim,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                         max_position_embeddings=1024, tie_word_embeddings=True, use_sliding_window=False,
                         bos_token_id=tiny.BOS_ID, eos_token_id=None, pad_token_id=tiny.PAD_ID)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).eval()
    model.generation_config.eos_token_id = None
    return model


def operations(run, tokens: int) -> dict[str, float]:
    """Aten calls per token made from Python (not from inside another aten call): all of them, and
    those that do work (not views; to a first approximation, a kernel each on a GPU)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    calls = work = 0
    for event in prof.events():
        if not event.name.startswith("aten::"):
            continue
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        if parent is None:
            calls += 1
            work += event.name not in VIEWS
    return {"calls": round(calls / tokens, 1), "work": round(work / tokens, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 7")
    parser.add_argument("--rows", type=int, default=16, help="rows decoded together (prompts x 2)")
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--layers", type=int, default=28)
    args = parser.parse_args()
    torch.set_num_threads(1)
    repeats = 3 if args.quick else 7
    tokenizer = tiny.char_tokenizer()
    model = narrow_qwen(args.layers, 12, 2, 8, len(tokenizer))
    sampler = Sampler(model, tokenizer)
    generator = torch.Generator().manual_seed(0)
    prompts = torch.randint(len(tiny.SPECIALS), len(tokenizer), (args.rows // 2, args.prompt_tokens), generator=generator)
    new = args.new_tokens

    def ours():
        sampler.sample(prompts.tolist(), n=2, max_new_tokens=new, seed=0, ignore_eos=True)

    ids = prompts.repeat_interleave(2, 0)

    def generate():
        with torch.inference_mode():
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                           do_sample=True, top_k=0, top_p=1.0, temperature=1.0, pad_token_id=tiny.PAD_ID)

    sides = {"ours": ours, "generate": generate}
    for run in sides.values():
        run()  # warm-up
    counts = {name: operations(run, new) for name, run in sides.items()}
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(repeats):  # interleaved, so load changes hit both alike
        for name, run in sides.items():
            start = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - start) * 1000 / new)
    for name in sides:
        print(f"{name:9s} {counts[name]['calls']:7.1f} aten calls/step, {counts[name]['work']:7.1f} not views, "
              f"{statistics.median(times[name]):6.2f} ms/step "
              f"[{min(times[name]):.2f}, {max(times[name]):.2f}]")
    result = {"bench": "decode_overhead", "layers": args.layers, "rows": args.rows, "new_tokens": new, "repeats": repeats,
              "aten_calls_per_step": counts,
              "ms_per_step": {name: round(statistics.median(t), 3) for name, t in times.items()},
              "ratio": round(statistics.median(times["generate"]) / statistics.median(times["ours"]), 3)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
