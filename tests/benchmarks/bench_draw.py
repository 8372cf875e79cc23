"""One draw per row from (rows, V) logits: the sampler's `sample_next` (inverse CDF in two
levels) against `torch.multinomial(softmax, 1)` (for one sample torch draws an exponential
race, V random numbers a row: the sampler's method before), at the tiny models' vocabulary and
at Qwen2.5's 151,936. Both in this process, one thread, same logits; median of `--repeats`.

    python tests/benchmarks/bench_draw.py [--rows 128] [--repeats 7]

The last line is JSON: per vocabulary, each side's median milliseconds and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from evo.policies.sampling import sample_next


def timed(draw, repeats: int) -> list[float]:
    draw()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        draw()
        times.append(time.perf_counter() - started)
    return times


def multinomial(logits: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The baseline with sample_next's output: tokens and their log-probabilities."""
    logp = logits.float().log_softmax(-1)
    tokens = torch.multinomial(logp.exp(), 1, generator=generator)[:, 0]
    return tokens, logp.gather(-1, tokens[:, None])[:, 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    result = {"name": "draw", "rows": args.rows, "threads": 1}
    for vocab in (100, 151_936):
        logits = torch.randn(args.rows, vocab, generator=torch.Generator().manual_seed(vocab)) * 3
        generator = torch.Generator().manual_seed(0)
        ours = timed(lambda: sample_next(logits, 1.0, 1.0, generator), args.repeats)
        theirs = timed(lambda: multinomial(logits, generator), args.repeats)
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"V={vocab}: sample_next {a * 1e3:.2f} ms (range {min(ours) * 1e3:.2f}-{max(ours) * 1e3:.2f}), "
              f"torch.multinomial {b * 1e3:.2f} ms (range {min(theirs) * 1e3:.2f}-{max(theirs) * 1e3:.2f}), ratio {a / b:.3f}")
        result[str(vocab)] = {"ours_ms": round(a * 1e3, 3), "multinomial_ms": round(b * 1e3, 3), "ratio": round(a / b, 3)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
