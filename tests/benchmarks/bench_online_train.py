"""`evo run --train` overhead: the same search with a frozen `local:` policy and with the policy
training itself (grpo, one PPO step every 4 committed iterations, never stopped for having
nothing to learn), same spec, seed and model.

nguyen7 with `continue` prompts, a fresh ~1M-parameter tiny model (training/tiny.py), the loop's
default batch 4 and depth 2, up to 32 new tokens, one torch thread. Each side runs the search
to its budget (the target is off); the figure is the ratio of wall seconds per iteration, and
the extra wall time of the training run against the seconds its PPO steps took (<= 1: the
steps cost no more than themselves; evaluations in flight go on during a step).

    python tests/benchmarks/bench_online_train.py [--quick]

The last line is JSON: {"name": "online_train", "frozen_s_per_iteration": ..., "train_s_per_iteration": ...,
"ratio": ..., "ppo_steps": ..., "ppo_s": ..., "extra_wall_over_ppo": ...}.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "nguyen7" / "problem.toml"
OVERRIDES = {"prompt.style": "continue", "search.target": None}


def search(init: Path, out: Path, iterations: int, train: bool) -> tuple[float, dict | None]:
    from evo import run_dir
    from evo.loop import RunOptions
    from evo.policies.local import LocalPolicy
    from evo.training_log import figures
    from training.online import Learner, OnlineSettings

    overrides = {**OVERRIDES, "search.iterations": iterations}
    overrides = {k: v for k, v in overrides.items() if v is not None}
    config = run_dir.new_config(SPEC, f"local:{init}", 0, out, overrides, RunOptions(max_new_tokens=32), "process")
    policy = LocalPolicy(init)
    learners = []
    if train:  # idle_steps 0: every step is taken, even when the fresh model's proposals teach nothing
        spec = config.spec()
        learners.append(Learner.of(policy, config.directory, run_dir.loop_config(spec, config), config.policy, spec.problem,
                                   OnlineSettings.of("grpo", 4, {"idle_steps": 0})))
    started = time.perf_counter()
    run_dir.execute(config, policy, progress=False, observers=learners)
    return time.perf_counter() - started, figures(out)


def main() -> None:
    import torch

    from training import tiny

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    iterations = 24 if parser.parse_args().quick else 48
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        init = Path(tmp) / "init"
        tok = tiny.char_tokenizer()
        tiny.save(tiny.new_model("nano", "llama", tok, context=2048, seed=0), tok, init)
        frozen_s, _ = search(init, Path(tmp) / "frozen", iterations, train=False)
        train_s, figures = search(init, Path(tmp) / "train", iterations, train=True)
    ppo_s = figures["seconds"]
    print(f"{iterations} iterations: frozen {frozen_s:.1f} s, training {train_s:.1f} s "
          f"({figures['steps']} PPO steps, {ppo_s:.1f} s in them)")
    print(json.dumps({"name": "online_train", "iterations": iterations, "frozen_s_per_iteration": frozen_s / iterations,
                      "train_s_per_iteration": train_s / iterations, "ratio": train_s / frozen_s,
                      "ppo_steps": figures["steps"], "ppo_s": ppo_s,
                      "extra_wall_over_ppo": (train_s - frozen_s) / ppo_s if ppo_s else None}))


if __name__ == "__main__":
    main()
