"""`evo train --engine trl`: VPO (and every "one score per rollout, group z-score" estimator)
inside TRL's GRPOTrainer, on one process or many (`accelerate launch` / `torchrun`).

TRL owns sampling, the loss, the optimizer and the scale-out (accelerate, DeepSpeed, FSDP,
its vLLM modes); this module gives it a dataset of the task's m-answer prompts (each row
carrying its instance's index) and the set-score reward of `training.integrations.set_reward`.
TRL then computes (r - mean_group) / (std_group + 1e-4) with the sample std (Bessel's
correction); the project's estimators use the population std and eps 1e-6. The advantages
therefore differ by the factor pop_std / (sample_std + 1e-4) per group, the same for every
rollout of a group (sign and ranking are identical); tests/test_trl.py checks it.

Under N processes `--prompts` stays the global batch: each optimizer step trains on prompts x
group rollouts in all, each rank on 1/N of them. The export gathers the full state dict
(`accelerator.get_state_dict`: ZeRO-3 and FSDP2 shards included) and the main process writes it,
in the init checkpoint's dtype. Accelerate configs for DDP, ZeRO-2, ZeRO-3 and FSDP2 ship in
`training/integrations/accelerate_configs/` (`config_file`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from evo.errors import UserError
from evo.policies.local import load_tokenizer
from evo.policies.prompt_format import PromptFormat
from evo.torch_files import refuse_code
from tasks.base import Instance, Task
from training import checkpoint, memory, models, precision, rates
from training.config import TrainConfig
from training.integrations.set_reward import ALGOS, SetReward, check
from training.rollouts import check_template

__all__ = ["ALGOS", "LAUNCH_CONFIGS", "config_file", "dataset", "export", "fit", "grpo_config", "last_checkpoint", "run", "trainer",
           "without_zero3"]


LAUNCH_CONFIGS = ("ddp", "zero2", "zero3", "fsdp2")  # training/integrations/accelerate_configs/NAME.yaml


def config_file(name: str) -> Path:
    """The shipped accelerate config `name` (one of LAUNCH_CONFIGS), for `accelerate launch --config_file`."""
    if name not in LAUNCH_CONFIGS:
        raise UserError(f"no accelerate config {name!r}; shipped: {', '.join(LAUNCH_CONFIGS)}")
    return Path(__file__).parent / "accelerate_configs" / f"{name}.yaml"


def world_size() -> int:
    """The number of training processes (torchrun and accelerate launch set WORLD_SIZE)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def given_flags(config: TrainConfig) -> set[str]:
    """The fields of `config` that differ from TrainConfig's defaults (what a caller asked for)."""
    defaults = TrainConfig(task=config.task, algo=config.algo, init=config.init, out=config.out)
    return {f.name for f in dataclasses.fields(TrainConfig) if getattr(config, f.name) != getattr(defaults, f.name)}


def vllm_fields() -> list[str]:
    """`--vllm-option` keys: GRPOConfig's `vllm_*` fields without the prefix (mode, enable_sleep_mode, ...)."""
    from trl import GRPOConfig

    return sorted(f.name[len("vllm_"):] for f in dataclasses.fields(GRPOConfig) if f.name.startswith("vllm_"))


def refuse_unsupported(config: TrainConfig, use_vllm: bool) -> None:
    """One line for a flag `--engine trl` cannot honour (every other one maps onto GRPOConfig)."""
    check(config.algo, config.options)
    if config.group < 2:
        raise UserError("--engine trl needs --group >= 2 (TRL z-scores a group's rewards)")
    if config.diversity_coef:
        raise UserError("--diversity-coef is the project's trainer's (--engine ours); TRL's reward has no group-distance term")
    if config.sync_every != 1:
        raise UserError("--sync-every is for --engine ours; TRL pushes the weights into vLLM after every optimizer step")
    if config.tis_cap:
        raise UserError("--tis-cap is for --engine ours; TRL corrects with its own: --vllm-option "
                        "importance_sampling_mode=token_truncate --vllm-option importance_sampling_clip_max=C")
    if config.vllm_sleep is not None:
        raise UserError("--vllm-sleep is for --engine ours; TRL's colocated vLLM sleeps with --vllm-option enable_sleep_mode=true")
    if config.loss_norm not in (0, config.max_new_tokens):
        raise UserError("--engine trl divides summed token losses by --max-new-tokens (TRL's dr_grpo); drop --loss-norm")
    if config.vllm_options and not use_vllm:
        raise UserError("--vllm-option with --engine trl needs --use-vllm")
    if use_vllm:
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            raise UserError("--use-vllm needs vLLM installed: pip install 'vpo-evo[trl,vllm]'")
        known = vllm_fields()
        unknown = sorted(set(config.vllm_options) - set(known))
        if unknown:
            raise UserError(f"--vllm-option {', '.join(unknown)} is not a TRL vLLM setting (known: {', '.join(known)})")


def grpo_config(config: TrainConfig, *, use_vllm: bool, progress: bool, processes: int = 1, save: bool = False,
                plan: precision.Precision | None = None):
    """TRL's GRPOConfig for `config`: one generation of prompts x group rollouts per optimizer step
    in all (each of `processes` ranks takes 1/processes of it), token losses summed over a
    constant (loss_type dr_grpo, as the project's trainer), constant lr; with `save`, TRL's
    resumable checkpoint every `save_every` steps (the last one kept) in out/trl; bf16 autocast
    as `plan` (None: `precision_plan` of the config) says."""
    from trl import GRPOConfig

    rollouts = config.prompts * config.group
    micro = config.micro_batches or 1  # TRL splits evenly; the memory plan is the project's trainer's
    chunks = micro * processes
    if rollouts % chunks:
        raise UserError(f"--engine trl splits prompts x group ({rollouts}) rollouts over --micro-batches x processes "
                        f"({micro} x {processes}); make it divisible (a smaller split would train nothing)")
    device = models.resolve_device(config.device)
    bf16 = (plan or precision_plan(config)).autocast
    vllm = {f"vllm_{key}": value for key, value in config.vllm_options.items()} if use_vllm else {}
    return GRPOConfig(
        output_dir=str(Path(config.out) / "trl"), per_device_train_batch_size=rollouts // chunks,
        gradient_accumulation_steps=micro, num_generations=config.group,
        max_completion_length=config.max_new_tokens, temperature=config.temperature, top_p=config.top_p,
        learning_rate=config.lr, weight_decay=config.weight_decay, max_grad_norm=config.max_grad_norm,
        lr_scheduler_type="constant", beta=config.kl_coef, epsilon=config.eps_low, epsilon_high=config.eps_high,
        entropy_coef=config.entropy_coef, num_iterations=config.ppo_epochs, loss_type="dr_grpo",
        scale_rewards="group", max_steps=config.steps, seed=config.seed, bf16=bf16, use_cpu=device == "cpu",
        use_vllm=use_vllm, **vllm, save_strategy="steps" if save else "no", save_steps=config.save_every,
        save_total_limit=1, logging_steps=1, report_to="none",
        disable_tqdm=not progress, shuffle_dataset=False, dataloader_num_workers=0,
        **({"gradient_checkpointing": True} if config.gradient_checkpointing else {}))


def precision_plan(config: TrainConfig) -> precision.Precision:
    """The run's dtypes: float32 weights (TRL's own default when it loads a model) with bf16
    autocast on CUDA for a 16-bit checkpoint, as the project's trainer (`training.precision`)."""
    return precision.plan(models.resolve_device(config.device), precision.checkpoint_dtype(config.init),
                          lora=bool(config.lora_rank), setting=config.weight_dtype, bf16=config.bf16)


def resolved(config: TrainConfig) -> TrainConfig:
    """`config` with its autocast, weight dtype and learning rate decided (what train_config.json records)."""
    chosen = precision_plan(config)
    config = dataclasses.replace(config, bf16=chosen.autocast, weight_dtype=precision.dtype_name(chosen.weights))
    return rates.resolved(config, rates.parameters_at(config.init))


def prompt_format(config: TrainConfig, tokenizer) -> PromptFormat:
    """The run's prompt format: `config.chat` / `config.system` where given, else as the init records."""
    return PromptFormat.chosen(tokenizer, config.init, chat=config.chat, system=config.system)


def dataset(task: Task, instances: Sequence[Instance], m: int, prompt: PromptFormat):
    """A `datasets.Dataset` of m-answer prompts and instance indices: chat messages (`prompt.messages`)
    when `prompt` is the chat template, else the texts; TRL's GRPOTrainer tokenizes either form to
    the ids `prompt.encode` gives."""
    from datasets import Dataset

    texts = [task.prompt(i, m) for i in instances]
    prompts: list = [prompt.messages(p) for p in texts] if prompt.chat else texts
    return Dataset.from_dict({"prompt": prompts, "instance": list(range(len(instances)))})


def lora_config(config: TrainConfig):
    from peft import LoraConfig

    return LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, lora_dropout=0.0, target_modules="all-linear")


def trainer(config: TrainConfig, task: Task, *, use_vllm: bool = False, progress: bool = False, callbacks=(), save: bool = False,
            plan: precision.Precision | None = None):
    """A GRPOTrainer over the task's m-answer prompts with the set-score reward of `config.algo`:
    `config.steps` generations of `config.prompts` distinct prompts (the global batch); the
    model in `plan`'s dtypes (None: `precision_plan`: float32 weights, TRL's own default)."""
    from trl import GRPOTrainer

    check(config.algo, config.options)
    config = config if config.lr else resolved(config)
    m = config.set_size
    instances = task.instances("train", config.prompts * config.steps, seed=config.seed)
    check_template(task, instances[0], config.algo, m)
    chosen = plan or precision_plan(config)
    args = grpo_config(config, use_vllm=use_vllm, progress=progress, processes=world_size(), save=save, plan=chosen)
    if chosen.warning:
        print(f"warning: {chosen.warning}", file=sys.stderr, flush=True)
    model, tokenizer = models.load(config.init, models.ModelOptions(device="cpu"), dtype=chosen.weights)
    prompt = config.prompt_format or prompt_format(config, tokenizer)  # a --chat without a template: one line
    eos = model.generation_config.eos_token_id if model.generation_config.eos_token_id is not None else getattr(tokenizer, "eos_token_id")
    reward = SetReward(task, instances, config.algo, m, seed=config.seed, options=config.options,
                       eos_ids=eos if isinstance(eos, (list, tuple)) else [eos])
    return GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=dataset(task, instances, m, prompt),
                       processing_class=tokenizer, callbacks=list(callbacks),
                       peft_config=lora_config(config) if config.lora_rank else None)


def export(grpo, config: TrainConfig, directory: Path) -> None:
    """Write the trained weights (LoRA merged) as a Hugging Face directory in the init
    checkpoint's dtype: a bf16 checkpoint trained with float32 masters is written as bf16 (the
    masters rounded), the same size as the one it started from; a float32 one as float32.
    Every rank must call it: the full state dict is gathered from all of them (ZeRO-3 / FSDP2
    shards included, as `Trainer.save_model` does) and loaded into a CPU copy of the init model
    on the main process, which alone writes. The state dict comes from the outermost wrapper
    (`model_wrapped`: the DeepSpeed engine, which ZeRO-3's gather needs; FSDP2's sharded module)."""
    state = grpo.accelerator.get_state_dict(grpo.model_wrapped)
    if grpo.accelerator.is_main_process:
        with without_zero3():
            model, _ = models.load(config.init, models.ModelOptions(device="cpu"), dtype=precision.checkpoint_dtype(config.init))
            if config.lora_rank:
                from peft import get_peft_model

                model = get_peft_model(model, lora_config(config))
            load_full(model, state)
            checkpoint.export(model, grpo.processing_class, directory, half=False)  # LoRA merged layer by layer
    grpo.accelerator.wait_for_everyone()


@contextlib.contextmanager
def without_zero3() -> Iterator[None]:
    """Models loaded, generated with or saved in this block on one process are plain local ones:
    while a ZeRO-3 trainer lives, transformers builds every model inside deepspeed.zero.Init and
    generates with synced ranks, collectives the other ranks would never join (a hang)."""
    from transformers.integrations import deepspeed as hf_deepspeed

    held = hf_deepspeed._hf_deepspeed_config_weak_ref  # the Trainer's DeepSpeed config; None without DeepSpeed
    hf_deepspeed.unset_hf_deepspeed_config()
    try:
        yield
    finally:
        hf_deepspeed._hf_deepspeed_config_weak_ref = held


def load_full(model: torch.nn.Module, state: dict) -> None:
    """`load_state_dict` that accepts a gathered state dict without tied copies, and nothing less."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    loaded = {model.state_dict()[k].data_ptr() for k in state if k in model.state_dict()}
    untied = [k for k in missing if model.state_dict()[k].data_ptr() not in loaded]
    if unexpected or untied:
        raise RuntimeError(f"gathered state dict does not fit the model: missing {untied[:3]}, unexpected {unexpected[:3]}")


class StepClock:
    """This rank's share of the current optimizer step: seconds in TRL's generation and scoring
    (less the weight sync), seconds in vLLM's weight sync, rollouts, completion tokens, instances."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.rollout = self.sync = 0.0
        self.rollouts = self.tokens = 0
        self.instances: list[int] = []

    def attach(self, grpo) -> None:
        """Time `grpo`'s generation (TRL's `_generate_and_score_completions`) and vLLM weight sync."""
        generate = grpo._generate_and_score_completions

        def generate_timed(inputs):
            start, synced = time.perf_counter(), self.sync
            out = generate(inputs)
            self.rollout += time.perf_counter() - start - (self.sync - synced)
            self.rollouts += int(out["completion_ids"].shape[0])
            self.tokens += int(out["completion_mask"].sum())
            self.instances += [int(row["instance"]) for row in inputs]
            return out

        grpo._generate_and_score_completions = generate_timed
        if getattr(grpo, "vllm_generation", None) is not None:
            sync = grpo.vllm_generation.sync_weights

            def sync_timed(*args, **kwargs):
                start = time.perf_counter()
                try:
                    return sync(*args, **kwargs)
                finally:
                    self.sync += time.perf_counter() - start

            grpo.vllm_generation.sync_weights = sync_timed


def step_callback(grpo_ref: list, config: TrainConfig, records: list[dict]):
    """A TrainerCallback that times each optimizer step on every rank, gathers the figures over
    the ranks and appends TRL's log of the step plus them to out/metrics.jsonl (main process):
    seconds, rollout/sync/update seconds and peak_memory_gib (maxima over ranks), rollouts,
    prompts and tokens_per_s (totals over ranks); snapshots every --snapshot-every steps."""
    from accelerate.utils import gather_object
    from transformers import TrainerCallback

    out = Path(config.out)

    class StepMetrics(TrainerCallback):
        def __init__(self) -> None:
            self.clock = StepClock()
            self.figures: dict[str, float] = {}

        def on_train_begin(self, args, state, control, **kwargs):
            self.clock.attach(grpo_ref[0])

        def on_step_begin(self, args, state, control, **kwargs):
            self.clock.reset()
            self.device = grpo_ref[0].accelerator.device
            if self.device.type == "cuda":
                memory.reset_peak(self.device)
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            grpo, clock = grpo_ref[0], self.clock
            seconds = time.perf_counter() - self.started
            mine = torch.tensor([[seconds, clock.rollout, clock.sync, seconds - clock.rollout - clock.sync,
                                  memory.peak_gib(self.device), clock.rollouts, clock.tokens]],
                                dtype=torch.float64, device=self.device)
            every = grpo.accelerator.gather(mine).cpu()
            instances = gather_object([clock.instances])
            peak = every[:, :5].max(dim=0).values.tolist()
            self.figures = {"seconds": peak[0], "rollout_seconds": peak[1], "sync_seconds": peak[2],
                            "update_seconds": peak[3], "peak_memory_gib": peak[4], "rollouts": int(every[:, 5].sum()),
                            "prompts": len({i for rank in instances for i in rank}),
                            "tokens_per_s": float(every[:, 6].sum()) / peak[0]}
            if config.snapshot_every and state.global_step % config.snapshot_every == 0:
                export(grpo, config, out / checkpoint.SNAPSHOTS / f"{state.global_step:06d}")

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs and state.is_world_process_zero:
                record = {"step": state.global_step, **{k: float(v) for k, v in logs.items() if isinstance(v, (int, float))}}
                record.update(self.figures)
                records.append(record)
                with open(out / checkpoint.METRICS_FILE, "a") as handle:
                    handle.write(json.dumps(record) + "\n")

    return StepMetrics()


def last_checkpoint(out: Path) -> str | None:
    """The newest TRL checkpoint of the run in `out` (out/trl/checkpoint-N), if any."""
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(out / "trl")) if (out / "trl").is_dir() else None


def fit(config: TrainConfig, *, use_vllm: bool = False, progress: bool = True, task: Task | None = None,
        given: set[str] | None = None, resume: bool = False, trust_checkpoint: bool = False):
    """Train with TRL's GRPOTrainer (from its last checkpoint when `resume`); returns the trainer
    and the per-step records (main process). Refuses flags it cannot honour, a run that ends
    with fewer optimizer steps than asked, and, unless `trust_checkpoint`, a checkpoint with a
    file that could run code when loaded (evo.torch_files)."""
    from training.trainer import get_task

    use_vllm = use_vllm or config.rollouts == "vllm"
    given = given_flags(config) if given is None else given
    refuse_unsupported(config, use_vllm)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    start = last_checkpoint(out) if resume else None
    if resume and start is None:
        raise UserError(f"{out} holds no TRL checkpoint to resume (run with --save-every first)")
    if start is not None and not trust_checkpoint:
        refuse_code(Path(start), "resume only a checkpoint you made or trust, with --trust-checkpoint "
                                 "(DeepSpeed's own files always need it)")
    task = task if task is not None else get_task(config.task)
    tokenizer = load_tokenizer(config.init)
    prompt = prompt_format(config, tokenizer)
    config = dataclasses.replace(config, chat=prompt.chat, system=prompt.system)  # recorded by config.save
    if not config.max_new_tokens:  # sized from the task's demonstrations, as the project's trainer does
        from training.trainer import token_budget

        config = dataclasses.replace(config, max_new_tokens=token_budget(task, tokenizer, config.set_size, seed=config.seed))
    config = resolved(config)
    records: list[dict] = []
    grpo_ref: list = []
    grpo = trainer(config, task, use_vllm=use_vllm, progress=progress, save=resume or "save_every" in given,
                   callbacks=[step_callback(grpo_ref, config, records)])
    grpo_ref.append(grpo)
    if grpo.accelerator.is_main_process:
        config.save(out)
        if start is not None:  # the metrics of steps after the checkpoint are run again
            done = int(Path(start).name.split("-")[-1])
            lines = (out / checkpoint.METRICS_FILE).read_text().splitlines() if (out / checkpoint.METRICS_FILE).exists() else []
            (out / checkpoint.METRICS_FILE).write_text("".join(x + "\n" for x in lines if json.loads(x)["step"] <= done))
    grpo.accelerator.wait_for_everyone()
    grpo.train(resume_from_checkpoint=start)
    if grpo.state.global_step != config.steps:
        raise UserError(f"TRL ran {grpo.state.global_step} of {config.steps} optimizer steps; nothing exported")
    return grpo, records


def run(config: TrainConfig, *, use_vllm: bool = False, progress: bool = True, task: Task | None = None,
        given: set[str] | None = None, resume: bool = False, trust_checkpoint: bool = False) -> list[dict]:
    """Train with TRL's GRPOTrainer; writes a Hugging Face directory (merged weights), metrics.jsonl
    and train_config.json to `config.out`; returns the per-step records (empty on other ranks)."""
    grpo, records = fit(config, use_vllm=use_vllm, progress=progress, task=task, given=given, resume=resume,
                        trust_checkpoint=trust_checkpoint)
    export(grpo, config, Path(config.out))
    return records
