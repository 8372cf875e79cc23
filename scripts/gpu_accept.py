"""GPU acceptance run: the trainer's hot paths at a real model's shape, on one accelerator.

A randomly initialised model of Qwen2.5-1.5B's shape and 151,936-token vocabulary, in bf16 on
CUDA (float32 on CPU), with the project's tokenizer (its ids are the first 100 of the
vocabulary; the model may sample any of them). No weights or data are downloaded, and
nothing beyond torch, transformers (and peft for the LoRA row) is needed. Measured:

- the project's sampler (`evo.policies.sampler.Sampler`) against transformers' `generate`,
  completion tokens per second at the same batch, lengths and temperature, and how far its
  log-probabilities are from the trainer's forward over the same tokens (`sampler_logprob_gap`);
- one update of the project's trainer (`training.trainer.update`: log-probs, PPO-clip loss,
  backward, AdamW step) on those samples at micro-batches 1/4/16, with gradient
  checkpointing and with LoRA: seconds (the second of two updates) and peak memory; a
  configuration that does not fit is reported as {"oom": true};
- TRL's step at the same shapes only where TRL is installed (the GPU image has none);
- with `--stages ...,learn`, that training learns: a fresh Qwen2-layout model (`--learn-size`,
  the character vocabulary) is warmed up on a task's demonstrations (`training.sft.train`,
  the recipe of `evo pretrain`) with float32 master weights and, on CUDA, bfloat16 autocast
  (`training.precision.plan`), and its held-out mean reward must rise by more than
  `--learn-margin`; the run exits 1 when it does not (after writing its JSON);
- with `memory`, `online`, `export`: the memory plan at Qwen2.5-3B's shape predicted vs measured
  (the optimizer step included), online training from a bf16 checkpoint moving every weight
  tensor, and the export chain (scripts/gpu_checks.py).

    python scripts/gpu_accept.py                               # on the GPU (scripts/gpu_accept.sh)
    python scripts/gpu_accept.py --shape tiny --device cpu --prompts 2 --group 2 \\
        --prompt-tokens 8 --new-tokens 8 --micro-batches 1,2   # the CPU smoke test (tests/test_gpu_accept.py)

The last line printed is the JSON of every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import json
import statistics
import sys
import time
import types
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tasks  # noqa: E402
from scripts import gpu_checks  # noqa: E402
from training.pretrain import context_for  # noqa: E402
from evo.policies.sampler import Sampler  # noqa: E402
from training import loss, memory, models, precision, sft, tiny  # noqa: E402
from training.config import TrainConfig  # noqa: E402
from training.trainer import State, update  # noqa: E402

QWEN25_1_5B = dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                   num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768, rope_theta=1e6)
SHAPES = {
    "qwen2.5-1.5b": QWEN25_1_5B,
    "qwen2.5-3b": {**QWEN25_1_5B, "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
                   "num_attention_heads": 16, "num_key_value_heads": 2},
    "tiny": {**QWEN25_1_5B, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
             "num_attention_heads": 2, "num_key_value_heads": 1},
}


def build(shape: str, device: str, dtype: torch.dtype) -> torch.nn.Module:
    """A randomly initialised Qwen2 model of `shape`, made directly on `device` in `dtype`."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(**SHAPES[shape], tie_word_embeddings=True, use_sliding_window=False,
                         bos_token_id=tiny.BOS_ID, eos_token_id=tiny.EOS_ID, pad_token_id=tiny.PAD_ID)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
    model.generation_config.pad_token_id = tiny.PAD_ID
    model.generation_config.eos_token_id = tiny.EOS_ID
    return model.eval()


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(device: str, fn) -> tuple[float, object]:
    synchronize(device)
    started = time.perf_counter()
    result = fn()
    synchronize(device)
    return time.perf_counter() - started, result


def sampler_rate(model, tokenizer, prompts: list[list[int]], group: int, tokens: int, device: str, repeats: int):
    """Completion tokens/s of the project's sampler (median of `repeats`) and the last rollout."""
    sampler = Sampler(model, tokenizer)
    sampler.sample(prompts[:1], n=1, max_new_tokens=4, seed=0, ignore_eos=True)  # warm-up
    rates, samples = [], None
    for seed in range(repeats):
        seconds, samples = timed(device, lambda: sampler.sample(prompts, n=group, max_new_tokens=tokens, temperature=1.0,
                                                                seed=seed, ignore_eos=True))
        rates.append(float(samples.completion_mask.sum()) / seconds)
    return statistics.median(rates), samples


@torch.no_grad()
def logprob_gap(model, samples, rows: int = 16) -> dict:
    """How far the sampler's log-probabilities are from the trainer's forward over the same tokens
    (the two sides of the PPO ratio), over the first `rows` rollouts: mean and max |difference|.
    A sampler that decodes wrongly on this device shows here, not in its speed."""
    picked = torch.arange(min(rows, samples.completion_ids.shape[0]))
    trainer_logp, _ = loss.token_logprobs(model, samples, picked)
    mask = samples.completion_mask[picked].bool()
    gap = (trainer_logp.float() - samples.logprobs[picked].to(trainer_logp.device))[mask.to(trainer_logp.device)].abs()
    return {"mean": round(float(gap.mean()), 5), "max": round(float(gap.max()), 5), "tokens": int(mask.sum())}


@torch.no_grad()
def generate_rate(model, prompts: list[list[int]], group: int, tokens: int, device: str, repeats: int) -> float:
    """Completion tokens/s of transformers' `generate` at the same shapes (median of `repeats`)."""
    ids = torch.tensor(prompts, device=device).repeat_interleave(group, 0)
    common = dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0, pad_token_id=tiny.PAD_ID, eos_token_id=None)
    model.generate(ids[:1], attention_mask=torch.ones_like(ids[:1]), max_new_tokens=4, min_new_tokens=4, **common)
    rates = []
    for _ in range(repeats):
        seconds, out = timed(device, lambda: model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens,
                                                            min_new_tokens=tokens, **common))
        rates.append((out.shape[1] - ids.shape[1]) * ids.shape[0] / seconds)
    return statistics.median(rates)


def update_figures(model, tokenizer, samples, args, micro_batches: int, device: str) -> dict:
    """Seconds (second of two updates) and peak memory of the trainer's update; {"oom": True} if it does not fit."""
    config = TrainConfig(task="gpu-accept", algo="grpo", init="-", out="-", prompts=args.prompts, group=args.group,
                         max_new_tokens=args.new_tokens, micro_batches=micro_batches, lr=1e-6, device=device)
    trained = [p for p in model.parameters() if p.requires_grad]
    state = State(config, None, model, tokenizer, torch.optim.AdamW(trained, lr=config.lr), None, 0)
    rolls = SimpleNamespace(samples=samples)
    advantages = torch.randn(args.prompts, args.group, generator=torch.Generator().manual_seed(0)).numpy()
    figures: dict = {"micro_batches": micro_batches}
    try:
        update(state, rolls, advantages)  # allocates AdamW's moments and warms the kernels
        memory.reset_peak(device)
        seconds, record = timed(device, functools.partial(update, state, rolls, advantages))
        figures.update(seconds=round(seconds, 3), peak_memory_gib=round(memory.peak_gib(device), 2),
                       loss_finite=bool(torch.isfinite(torch.tensor(record["loss"]))))
    except torch.cuda.OutOfMemoryError:  # torch.OutOfMemoryError on torch >= 2.5; this name on older ones too
        figures["oom"] = True
    del state
    model.zero_grad(set_to_none=True)
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return figures


@contextlib.contextmanager
def earlier_loss(path: Path):
    """The trainer's update with a baseline loss module (its token_logprobs returns every
    token's log-softmax, (rows, T, V) in float32, which its ppo_clip_loss takes)."""
    from training import trainer

    module = sys.modules["earlier_loss"] = types.ModuleType("earlier_loss")
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)  # noqa: S102 - this repository's own past code
    saved = trainer.token_logprobs, trainer.ppo_clip_loss
    trainer.token_logprobs = lambda model, samples, rows, entropy=False: module.token_logprobs(model, samples, rows)
    trainer.ppo_clip_loss = module.ppo_clip_loss
    try:
        yield
    finally:
        trainer.token_logprobs, trainer.ppo_clip_loss = saved


@dataclass(frozen=True)
class Learning:
    """The learning stage: a warm-up from scratch whose held-out reward must rise by `margin`."""

    task: str = "maze"
    size: str = "micro"  # a training.tiny size, Qwen2 layout
    steps: int = 500
    batch_size: int = 32
    pool: int = 2000  # training instances
    margin: float = 0.03  # the held-out mean reward must rise by more (docs/training.md: the CPU trials)
    seed: int = 0
    instances: int = 32  # held-out instances
    samples: int = 8  # completions per held-out instance
    max_new_tokens: int = 80


def held_out_reward(model, tokenizer, task, instances, learn: Learning, device: str, bf16: bool) -> dict:
    """sft.evaluate's figures of single-answer completions, sampled under the run's autocast."""
    with models.autocast(device, bf16):
        quality = sft.evaluate(model, tokenizer, task, instances, samples=learn.samples, max_new_tokens=learn.max_new_tokens,
                               seed=learn.seed)
    return {key: round(value, 4) for key, value in quality.items()
            if key in ("parse_rate", "nonzero_rate", "mean_scalar", f"best_at_{learn.samples}")}


def learning_stage(learn: Learning, device: str, bf16: bool | None) -> dict:
    """Warm up a fresh model on `learn.task` with the precision plan of a full fine-tune from a
    float32 checkpoint (`bf16`: autocast; None: on CUDA) and compare the held-out reward."""
    task = tasks.get(learn.task)
    tokenizer = tiny.char_tokenizer()
    held_out = task.instances("test", learn.instances, seed=learn.seed)
    context = context_for(task, [*task.instances("train", 20, seed=learn.seed), *held_out[:20]], 1,
                          learn.max_new_tokens, None)
    model = tiny.new_model(learn.size, "qwen2", tokenizer, context=context, seed=learn.seed)
    plan = precision.plan(device, torch.float32, lora=False, bf16=device.startswith("cuda") if bf16 is None else bf16)
    model.to(device=device, dtype=plan.weights)
    before = held_out_reward(model, tokenizer, task, held_out, learn, device, plan.autocast)
    computed: set[str] = set()  # the dtype the first linear layer's forward returns while training
    linear = next(module for module in model.modules() if isinstance(module, torch.nn.Linear))
    hook = linear.register_forward_hook(lambda module, inputs, output: computed.add(precision.dtype_name(output.dtype)))
    config = sft.SFTConfig(steps=learn.steps, batch_size=learn.batch_size, warmup=min(100, learn.steps // 5),
                           multi_fraction=0.0, pool=learn.pool, length_groups=1, seed=learn.seed,
                           threads=torch.get_num_threads())
    seconds, losses = timed(device, lambda: sft.train(model, tokenizer, task, config, bf16=plan.autocast))
    hook.remove()
    after = held_out_reward(model, tokenizer, task, held_out, learn, device, plan.autocast)
    rise = after["mean_scalar"] - before["mean_scalar"]
    return {**asdict(learn), "parameters": tiny.param_count(model),
            "master_dtype": precision.dtype_name(next(model.parameters()).dtype),
            "autocast_dtype": "bfloat16" if plan.autocast else None, "compute_dtype": sorted(computed),
            "train_seconds": round(seconds, 1), "first_loss": round(losses[0], 3),
            "last_loss": round(sum(losses[-10:]) / len(losses[-10:]), 3), "before": before, "after": after,
            "reward_before": before["mean_scalar"], "reward_after": after["mean_scalar"], "rise": round(rise, 4),
            "passed": bool(rise > learn.margin)}


def speed_stage(args, device: str) -> dict:
    """The sampler's rate against `generate` and the update's seconds and memory (module docstring)."""
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    started = time.perf_counter()
    model = build(args.shape, device, dtype)
    tokenizer = tiny.char_tokenizer()
    prompts = torch.randint(len(tiny.SPECIALS), len(tokenizer), (args.prompts, args.prompt_tokens)).tolist()
    figures: dict = {"shape": args.shape, "parameters": sum(p.numel() for p in model.parameters()),
                     "dtype": str(dtype).removeprefix("torch."), "prompts": args.prompts, "group": args.group,
                     "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens,
                     "build_seconds": round(time.perf_counter() - started, 1)}
    rate, samples = sampler_rate(model, tokenizer, prompts, args.group, args.new_tokens, device, args.repeats)
    figures["sampler_tokens_per_s"] = round(rate, 1)
    figures["sampler_logprob_gap"] = logprob_gap(model, samples)
    figures["generate_tokens_per_s"] = round(generate_rate(model, prompts, args.group, args.new_tokens, device, args.repeats), 1)
    figures["sampler_vs_generate"] = round(figures["sampler_tokens_per_s"] / figures["generate_tokens_per_s"], 2)
    rollout_seconds = float(samples.completion_mask.sum()) / rate
    updates = {}
    for micro in (int(x) for x in args.micro_batches.split(",")):
        updates[f"full_mb{micro}"] = update_figures(model, tokenizer, samples, args, micro, device)
    first = int(args.micro_batches.split(",")[0])
    if args.before:
        micro = int(args.micro_batches.split(",")[min(1, len(args.micro_batches.split(",")) - 1)])
        with earlier_loss(args.before):
            updates[f"before_mb{micro}"] = update_figures(model, tokenizer, samples, args, micro, device)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = True
    updates[f"checkpointing_mb{first}"] = update_figures(model, tokenizer, samples, args, first, device)
    model.gradient_checkpointing_disable()
    try:
        lora = models.with_lora(model, args.lora_rank, 2.0 * args.lora_rank)
        updates[f"lora{args.lora_rank}_mb{first}"] = update_figures(lora, tokenizer, samples, args, first, device)
    except Exception as error:  # noqa: BLE001 - peft missing on the machine: say so in the figures
        updates[f"lora{args.lora_rank}_mb{first}"] = {"error": str(error).splitlines()[0]}
    for row in updates.values():
        if "seconds" in row:
            row["step_seconds"] = round(rollout_seconds + row["seconds"], 3)
    figures["updates"] = updates
    try:
        import trl  # noqa: F401
        figures["trl"] = "installed; run tests/benchmarks/bench_train_step.py for its step at these shapes"
    except ImportError:
        figures["trl"] = "not installed on this machine"
    return figures


STAGES = ("speed", "learn", "memory", "online", "export")


def stages(text: str) -> tuple[str, ...]:
    names = tuple(name for name in text.split(",") if name)
    if not names or set(names) - set(STAGES):
        raise argparse.ArgumentTypeError(f"stages are a comma-separated list of {', '.join(STAGES)}, got {text!r}")
    return names


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=stages, default=STAGES, help="comma-separated: speed, learn, memory, online, export (default all)")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen2.5-1.5b")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--micro-batches", default="1,4,16")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--before", type=Path, help="an earlier training/loss.py (`git show 1e2f708:training/loss.py`): "
                        "one more row, the update at the second micro-batch count with that loss")
    parser.add_argument("--memory-shape", choices=sorted(SHAPES), default="qwen2.5-3b")
    parser.add_argument("--memory-rows", type=int, default=32)
    parser.add_argument("--memory-prompt", type=int, default=128)
    parser.add_argument("--memory-completion", type=int, default=384)
    defaults = Learning()
    parser.add_argument("--learn-task", default=defaults.task, choices=tasks.names())
    parser.add_argument("--learn-size", default=defaults.size, choices=sorted(tiny.SIZES))
    for name in ("steps", "batch_size", "pool", "seed", "instances", "samples", "max_new_tokens"):
        parser.add_argument(f"--learn-{name.replace('_', '-')}", type=int, default=getattr(defaults, name))
    parser.add_argument("--learn-margin", type=float, default=defaults.margin)
    parser.add_argument("--learn-bf16", action=argparse.BooleanOptionalAction,
                        help="bfloat16 autocast in the learning stage (default: on CUDA)")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    device = args.device
    started = time.perf_counter()
    figures: dict = {"name": "gpu_accept", "device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
                     "torch": torch.__version__, "transformers": __import__("transformers").__version__,
                     "stages": list(args.stages)}
    if "speed" in args.stages:
        figures.update(speed_stage(args, device))
        gc.collect()  # the 1.5B model's memory goes back before the learning stage
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    if "learn" in args.stages:
        learn = Learning(**{name: getattr(args, f"learn_{name}") for name in Learning.__dataclass_fields__})
        figures["learning"] = learning_stage(learn, device, args.learn_bf16)
    if "memory" in args.stages:
        figures["memory"] = gpu_checks.memory_stage(build, args.memory_shape, device, args.memory_rows,
                                                    args.memory_prompt, args.memory_completion)
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    if "online" in args.stages:
        figures["online"] = gpu_checks.online_stage(device)
    if "export" in args.stages:
        figures["export"] = gpu_checks.export_stage(device)
    figures["total_seconds"] = round(time.perf_counter() - started, 1)
    line = json.dumps(figures)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(line + "\n")
    print(line, flush=True)
    learning = figures.get("learning")
    if learning and not learning["passed"]:
        print(f"learning stage failed: held-out mean reward {learning['reward_before']} -> {learning['reward_after']}, "
              f"a rise of {learning['rise']}, not more than the margin {learning['margin']}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
