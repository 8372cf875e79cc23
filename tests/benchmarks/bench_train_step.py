"""One RL training step, ours vs TRL's GRPOTrainer (plain, and as `evo train --engine trl` builds it),
on the same tiny model, batch, G and lengths.

Both run in this process on one CPU thread (pinned), from the same freshly initialised
~1M-parameter Llama-style checkpoint, with 16 prompts x 8 generations x up to 48 new tokens,
temperature 1, no KL, one PPO epoch. Each side runs a few steps; the first is a warm-up and
the rest are timed (median and range). TRL is a benchmark-only dependency (`pip install trl`).

    python tests/benchmarks/bench_train_step.py [--quick]

The last line is JSON: {"name": "train_step", "ours_s_per_step": ..., "trl_s_per_step": ...,
"trl_engine_s_per_step": ..., "ratio": ..., "ratio_vs_trl_engine": ...}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from training import tiny  # noqa: E402
from tests.toytask import CharMix  # noqa: E402

PROMPTS, GROUP, TOKENS = 16, 8, 48


def make_init(directory: Path, vocab: int | None = None) -> Path:
    """The nano Llama with the char tokenizer; `vocab` pads the embedding to a real model's
    vocabulary (the tokenizer's ids are its first rows), so the head's share is a real one."""
    tok = tiny.char_tokenizer()
    tiny.save(tiny.new_model("nano", "llama", vocab or tok, context=512, seed=0), tok, directory)
    return directory


def ours(init: Path, out: Path, steps: int, bf16: bool) -> tuple[list[float], float]:
    from training.config import TrainConfig
    from training.trainer import run

    config = TrainConfig(task="charmix", algo="grpo", init=str(init), out=str(out), steps=steps, prompts=PROMPTS,
                         group=GROUP, max_new_tokens=TOKENS, lr=1e-4, save_every=10**6, seed=0, bf16=bf16)
    records = run(config, task=CharMix(), progress=False)
    return [r["seconds"] for r in records], statistics.mean(r["length"] for r in records)


class Timer:
    """A TrainerCallback recording the wall time of every optimizer step."""

    def __init__(self) -> None:
        from transformers import TrainerCallback

        outer = self
        self.times: list[float] = []

        class Callback(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                outer.started = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                outer.times.append(time.perf_counter() - outer.started)

        self.callback = Callback()


def trl(init: Path, out: Path, steps: int, bf16: bool) -> tuple[list[float], float]:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    task = CharMix()
    prompts = [task.prompt(i) for i in task.instances("train", PROMPTS * steps)]
    lengths: list[float] = []

    def reward(completions, **kwargs):
        lengths.append(statistics.mean(len(c) for c in completions))
        return [float(task.score(None, [c]).mean()) for c in completions]

    args = GRPOConfig(output_dir=str(out), per_device_train_batch_size=PROMPTS * GROUP, num_generations=GROUP,
                      max_completion_length=TOKENS, max_steps=steps, learning_rate=1e-4, beta=0.0, use_cpu=True,
                      report_to="none", logging_steps=10**6, save_strategy="no", disable_tqdm=True,
                      shuffle_dataset=False, seed=0, dataloader_num_workers=0, bf16=bf16, fp16=False)
    timer = Timer()
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(init, dtype=torch.float32), reward_funcs=reward, args=args,
                          train_dataset=Dataset.from_dict({"prompt": prompts}),
                          processing_class=AutoTokenizer.from_pretrained(init), callbacks=[timer.callback])
    trainer.train()
    return timer.times, statistics.mean(lengths)


def trl_engine(init: Path, out: Path, steps: int, bf16: bool) -> list[float]:
    """`evo train --engine trl`: TRL's GRPOTrainer built by training.integrations.trl (set-score
    reward, dr_grpo token normalisation, constant lr) on the same task and batch."""
    from training.config import TrainConfig
    from training.integrations.trl import trainer

    config = TrainConfig(task="charmix", algo="grpo", init=str(init), out=str(out), steps=steps, prompts=PROMPTS,
                         group=GROUP, max_new_tokens=TOKENS, lr=1e-4, seed=0, bf16=bf16, device="cpu")
    timer = Timer()
    trainer(config, CharMix(), callbacks=[timer.callback]).train()
    return timer.times


def summary(times: list[float]) -> dict:
    timed = times[1:] or times
    return {"median": statistics.median(timed), "min": min(timed), "max": max(timed), "steps": len(timed)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 timed steps per side instead of 4")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bf16", action="store_true", help="both sides under bfloat16 autocast")
    parser.add_argument("--vocab", type=int, help="the model's vocabulary (e.g. 151936, Qwen2.5's); default: the tokenizer's")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    steps = 3 if args.quick else 5
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        init = make_init(root / "init", args.vocab)
        ours_times, ours_len = ours(init, root / "ours", steps, args.bf16)
        trl_times, trl_len = trl(init, root / "trl", steps, args.bf16)
        engine_times = trl_engine(init, root / "engine", steps, args.bf16)
    a, b, e = summary(ours_times), summary(trl_times), summary(engine_times)
    print(f"ours: median {a['median']:.2f}s per step (range {a['min']:.2f}-{a['max']:.2f}, {a['steps']} steps), mean completion {ours_len:.1f} tokens")
    print(f"--engine trl: median {e['median']:.2f}s per step (range {e['min']:.2f}-{e['max']:.2f}, {e['steps']} steps)")
    print(f"TRL : median {b['median']:.2f}s per step (range {b['min']:.2f}-{b['max']:.2f}, {b['steps']} steps), mean completion {trl_len:.1f} chars")
    print(json.dumps({"name": "train_step", "threads": args.threads, "vocab": args.vocab, "bf16": args.bf16, "prompts": PROMPTS, "group": GROUP, "max_new_tokens": TOKENS,
                      "ours_s_per_step": round(a["median"], 3), "trl_s_per_step": round(b["median"], 3),
                      "ours_range": [round(a["min"], 3), round(a["max"], 3)], "trl_range": [round(b["min"], 3), round(b["max"], 3)],
                      "trl_engine_s_per_step": round(e["median"], 3), "trl_engine_range": [round(e["min"], 3), round(e["max"], 3)],
                      "ratio": round(a["median"] / b["median"], 3), "ratio_vs_trl_engine": round(a["median"] / e["median"], 3)}))


if __name__ == "__main__":
    main()
