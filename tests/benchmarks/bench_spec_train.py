"""`evo train --spec` costs: one step's proposals scored concurrently in the sandbox pool vs one
at a time, and the seconds of a whole training step (sampling, scoring, update) on nguyen7.

Part 1 scores one step's 4 prompts x 4 proposals (distinct valid programs) with
`SpecTask.score_completions` (the spec's pool, `workers` 2) and the same programs one after
another through the same sandbox (the baseline); each side is repeated and the median taken.
Part 2 trains a fresh ~1M-parameter tiny model (training/tiny.py) on the spec for a few steps
(4 prompts x 4 rollouts x up to 64 tokens, `full` prompts, vpo_front) and reports the median
step time and the part of it spent scoring.

    python tests/benchmarks/bench_spec_train.py [--quick]

The last line is JSON: {"name": "spec_train", "pool_score_s": ..., "sequential_score_s": ...,
"ratio": ..., "step_s": ..., "score_s_per_step": ..., "score_share": ...}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evo import spec as specs  # noqa: E402
from evo.policies.base import Completion  # noqa: E402
from training.spec_task import SpecTask  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "nguyen7" / "problem.toml"
PROMPTS, GROUP = 4, 4


def reply(i: int) -> str:
    return f"```python\ndef f(x):\n    return {0.1 * (i + 1):.1f} * x + np.log(x * x + 1.0)\n```"


def score_times(directory: Path, repeats: int) -> tuple[float, float]:
    spec = specs.load(SPEC).override({"sandbox.workers": 2})
    pooled, sequential = [], []
    with SpecTask.open(spec, directory, seed=0, prompts_per_step=PROMPTS) as task:
        for r in range(repeats):
            instances = task.instances("train", PROMPTS)
            offset = r * PROMPTS * GROUP
            completions = [[Completion(reply(offset + i * GROUP + j)) for j in range(GROUP)] for i in range(PROMPTS)]
            codes = [task.parse(instances[0], reply(offset + k))[0] for k in range(PROMPTS * GROUP)]
            started = time.perf_counter()
            for code in codes:
                task.evaluator.evaluate(code)
            sequential.append(time.perf_counter() - started)
            started = time.perf_counter()
            task.score_completions(instances, completions)
            pooled.append(time.perf_counter() - started)
    return statistics.median(pooled), statistics.median(sequential)


class Timed(SpecTask):
    scoring: list[float] = []

    def score_completions(self, instances, completions):
        started = time.perf_counter()
        result = super().score_completions(instances, completions)
        self.scoring.append(time.perf_counter() - started)
        return result


def step_times(directory: Path, steps: int) -> tuple[float, float]:
    import torch

    from training import tiny
    from training.config import TrainConfig
    from training.trainer import run

    torch.set_num_threads(1)
    tok = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", tok, context=2048, seed=0), tok, directory / "init")
    config = TrainConfig(task="spec:" + str(SPEC), algo="vpo_front", init=str(directory / "init"), out=str(directory / "out"),
                         steps=steps, prompts=PROMPTS, group=GROUP, max_new_tokens=64, save_every=10**6, seed=0)
    with Timed.open(specs.load(SPEC), directory / "out", seed=0, prompts_per_step=PROMPTS) as task:
        records = run(config, task=task, progress=False)
    return statistics.median(r["seconds"] for r in records[1:]), statistics.median(task.scoring[1:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    with tempfile.TemporaryDirectory() as tmp:
        pool_s, sequential_s = score_times(Path(tmp) / "score", 2 if quick else 5)
        step_s, score_s = step_times(Path(tmp), 3 if quick else 6)
    print(f"scoring {PROMPTS * GROUP} proposals: pool {pool_s:.2f} s, one at a time {sequential_s:.2f} s")
    print(f"training step ({PROMPTS} x {GROUP} x <=64 tokens): {step_s:.2f} s, of which scoring {score_s:.2f} s")
    print(json.dumps({"name": "spec_train", "pool_score_s": pool_s, "sequential_score_s": sequential_s,
                      "ratio": sequential_s / pool_s, "step_s": step_s, "score_s_per_step": score_s,
                      "score_share": score_s / step_s}))


if __name__ == "__main__":
    main()
