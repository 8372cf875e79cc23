"""Held-out quality of symreg checkpoints with matched pools of 30 candidates: single-answer
models 30 samples of the 1-expression prompt, set models 10 completions of the 3-expression
prompt (NAME=DIR:3), every answer scored as it stands (headroom.py's figures: valid share,
best@1, best@30 / oracle, exact recoveries, front width, diversity over valid answers).

    OMP_NUM_THREADS=1 python experiments/symreg/evaluate.py warmup=RUNS/warmup grpo=RUNS/grpo-s0 \\
        vpo=RUNS/vpo-s0:3 --instances 100 --seed 4545 --out experiments/symreg/curves/step-final

Also the held-out curves: a run's snapshots RUN/steps/000100 ... are checkpoints like any other
(NAME=RUN/steps/000100:3). The JSON keeps every per-instance figure, so pairs are computed later.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from headroom import POOL, exact_counts, figures, means  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="NAME=DIR or NAME=DIR:M (M answers per completion)")
    parser.add_argument("--instances", type=int, default=100)
    parser.add_argument("--seed", type=int, default=4545, help="the test split's instance seed")
    parser.add_argument("--split", choices=("test", "benchmark"), default="test",
                        help="benchmark: the 26 named problems (Nguyen-1..12, 14 Feynman), --instances 26")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--tokens-per-answer", type=int, default=96)
    parser.add_argument("--batch", type=int, default=10, help="instances per policy call")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", required=True, help="path prefix for .json and .md")
    args = parser.parse_args()

    import torch

    import tasks
    from evo import policies
    from evo.compare.pools import Sampling, held_out, sample_pool

    torch.set_num_threads(args.threads)
    task = tasks.get("symreg")
    if args.split == "benchmark":  # the named problems, each once; the truth scores 1 as in the test split
        import numpy as np

        from evo.compare.pools import HeldOut

        named = task.instances("benchmark", args.instances, seed=args.seed)
        held = HeldOut(named, np.array([task.oracle_best(i) for i in named]), None)
    else:
        held = held_out(task, args.instances, args.seed, fronts=False)
    saved = Path(args.out + ".json")
    results: dict = json.loads(saved.read_text()) if saved.is_file() else {"settings": vars(args), "models": {}}
    stored = {**{k: parser.get_default(k) for k in vars(args)}, **results["settings"]}  # options added since: defaults
    if {k: v for k, v in stored.items() if k != "models"} != {k: v for k, v in vars(args).items() if k != "models"}:
        raise SystemExit(f"{saved} holds another evaluation's settings; pick another --out")
    for spec in args.models:  # written after each model; a model already in --out's JSON is kept (resumable)
        name, _, rest = spec.partition("=")
        if name in results["models"]:
            continue
        directory, _, m_text = rest.partition(":")
        m = int(m_text or 1)
        policy = policies.load(f"local:{directory}", device="cpu")
        sampling = Sampling(pool=POOL, tokens_per_answer=args.tokens_per_answer, temperature=args.temperature,
                            batch=args.batch, seed=args.seed, slack=8)
        started, texts = time.time(), []
        vectors = sample_pool(policy, task, held.instances, m, sampling, texts=texts)
        per = figures(task, held, vectors, exact_counts(task, held.instances, texts, m))
        results["instances"] = [i.data[0].name for i in held.instances] if args.split == "benchmark" else None
        results["models"][name] = {"directory": directory, "m": m, "mean": means(per), "per_instance": per,
                                   "seconds": round(time.time() - started, 1)}
        print(name, json.dumps(results["models"][name]["mean"]), flush=True)
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps(results, indent=1) + "\n")
    lines = [f"{args.instances} symreg test instances (seed {args.seed}); pools of {POOL} answers, temperature "
             f"{args.temperature}; oracle best = 1.0.", "",
             "| model | m | valid | best@1 | best@30 / oracle | exact (any) | front width | diversity (valid) |",
             "|" + "---|" * 8]
    for name, model in results["models"].items():
        r = model["mean"]
        lines.append(f"| {name} | {model['m']} | {r['valid']:.3f} | {r['best@1']:.3f} | {r['best@30/oracle']:.3f} "
                     f"| {r['exact_any']:.3f} | {r['front_width']:.2f} | {r['diversity_valid']:.3f} |")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
