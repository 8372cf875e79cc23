"""VPO (and every "one score per rollout, group z-score" estimator) inside TRL's GRPOTrainer.

TRL owns sampling, the loss, the optimizer and the scale-out (accelerate, DeepSpeed, FSDP,
its vLLM modes); this module gives it the two pieces that make its group z-score the
estimator's advantage:

- a dataset of the task's m-answer prompts, each row carrying the index of its instance;
- a reward function that parses a completion with the project's strict rules
  (`tasks.completions.score_completion`) and returns the rollout's set score: grpo the
  answer's scalar, multi_rlvr the sum of the set's scalars, random_weight_grpo one Dirichlet
  weighting's value, vpo R(S) = mean over K Dirichlet weightings of the set's best answer.
  The weightings come from (seed, step, instance), so every rollout of a group sees the same
  ones, exactly as `training.advantages.compute` draws them for a group of one prompt.

TRL then computes (r - mean_group) / (std_group + 1e-4) with the sample std (Bessel's
correction); the project's estimators use the population std and eps 1e-6. The advantages
therefore differ by the factor pop_std / (sample_std + 1e-4) per group, which is the same
for every rollout of a group (sign and ranking are identical); tests/test_trl.py checks it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from evo.errors import UserError
from evo.scores import scalarize
from tasks.base import Instance, Task
from tasks.completions import score_completion
from training import models
from training.advantages import dirichlet_weights, vpo_scores
from training.config import TrainConfig
from training.rollouts import answers_for, check_template

ALGOS = ("grpo", "multi_rlvr", "random_weight_grpo", "vpo")  # a group z-score of one score per rollout


def group_weightings(algo: str, d: int, seed: int, step: int, key: int, options: dict) -> np.ndarray | None:
    """The weightings shared by one group: (K, d) for vpo, (1, d) for random_weight_grpo."""
    rng = np.random.default_rng([seed, step, key])
    if algo == "vpo":
        return dirichlet_weights(rng, 1, options.get("K", 100), d, options.get("alpha", 1.0), options.get("sobol", False))[0]
    if algo == "random_weight_grpo":
        return rng.dirichlet(np.full(d, options.get("alpha", 1.0)), size=1)
    return None


def set_score(algo: str, matrix: np.ndarray, weights: np.ndarray, w: np.ndarray | None) -> float:
    """The one score of a rollout's (m, d) reward matrix that `algo` z-scores within a group."""
    if algo == "grpo":
        return float(scalarize(matrix[0], weights))
    if algo == "multi_rlvr":
        return float(scalarize(matrix, weights).sum())
    if algo == "random_weight_grpo":
        return float(matrix[0] @ w[0])
    return float(vpo_scores(matrix[None, None], w[None])[0, 0])


def completion_text(completion) -> str:
    """A completion as text (conversational datasets give a list of messages)."""
    return completion if isinstance(completion, str) else completion[-1]["content"]


class SetReward:
    """TRL reward function: the set score of each completion (dataset column `instance`)."""

    def __init__(self, task: Task, instances: Sequence[Instance], algo: str, m: int, *, seed: int,
                 options: dict, eos_ids: Sequence[int]) -> None:
        if algo not in ALGOS:
            raise UserError(f"--engine trl runs {', '.join(ALGOS)} (a group z-score of one score per rollout); got {algo}")
        self.task, self.instances, self.algo, self.m = task, list(instances), algo, m
        self.seed, self.options, self.eos_ids = seed, dict(options), set(eos_ids)
        self.__name__ = algo  # TRL logs rewards/<name>/mean

    def matrices(self, completions, completion_ids, instance) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(N, m, d) reward matrices, parsed flags and finished flags of a batch of completions."""
        d = len(self.task.objectives)
        out, parsed = np.zeros((len(completions), self.m, d)), np.zeros(len(completions), dtype=bool)
        finished = np.array([bool(ids) and ids[-1] in self.eos_ids for ids in completion_ids])
        for row, (text, key) in enumerate(zip(completions, instance)):
            out[row], parsed[row] = score_completion(self.task, self.instances[key], completion_text(text), finished[row], self.m)
        return out, parsed, finished

    def __call__(self, prompts, completions, completion_ids, instance, trainer_state=None, log_metric=None, **_) -> list[float]:
        step = trainer_state.global_step if trainer_state is not None else 0
        rewards, parsed, finished = self.matrices(completions, completion_ids, instance)
        d, weights = rewards.shape[2], np.asarray(self.task.weights, dtype=np.float64)
        shared = {key: group_weightings(self.algo, d, self.seed, step, key, self.options) for key in set(instance)}
        scores = [set_score(self.algo, r, weights, shared[key]) for r, key in zip(rewards, instance)]
        if log_metric is not None:
            for name, value in summary(rewards, parsed, finished, self.task.objectives, weights).items():
                log_metric(name, value)
        return scores


def summary(rewards: np.ndarray, parsed: np.ndarray, finished: np.ndarray, objectives: Sequence[str],
            weights: np.ndarray) -> dict:
    """Per-objective means and the deployment scalar of a batch, named as the trainer's metrics."""
    record = {f"reward/{name}": float(rewards[..., j].mean()) for j, name in enumerate(objectives)}
    scalars = scalarize(rewards, weights)
    record.update(scalar=float(scalars.mean()), best_in_set=float(scalars.max(axis=1).mean()),
                  parse_failed=float(1 - parsed.mean()), truncated=float(1 - finished.mean()))
    return record


def dataset(task: Task, instances: Sequence[Instance], m: int, chat: bool):
    """A `datasets.Dataset` of m-answer prompts (one user message each when `chat`) and instance indices."""
    from datasets import Dataset

    prompts = [task.prompt(i, m) for i in instances]
    if chat:
        prompts = [[{"role": "user", "content": p}] for p in prompts]
    return Dataset.from_dict({"prompt": prompts, "instance": list(range(len(instances)))})


def grpo_config(config: TrainConfig, *, use_vllm: bool, progress: bool):
    """TRL's GRPOConfig for `config`: one generation of prompts x group rollouts per optimizer step,
    token losses summed over a constant (loss_type dr_grpo, as the project's trainer), constant lr."""
    from trl import GRPOConfig

    rollouts = config.prompts * config.group
    if rollouts % config.micro_batches:
        raise UserError(f"--engine trl needs prompts x group ({rollouts}) divisible by --micro-batches ({config.micro_batches})")
    device = models.resolve_device(config.device)
    return GRPOConfig(
        output_dir=str(Path(config.out) / "trl"), per_device_train_batch_size=rollouts // config.micro_batches,
        gradient_accumulation_steps=config.micro_batches, num_generations=config.group,
        max_completion_length=config.max_new_tokens, temperature=config.temperature, top_p=config.top_p,
        learning_rate=config.lr, weight_decay=config.weight_decay, max_grad_norm=config.max_grad_norm,
        lr_scheduler_type="constant", beta=config.kl_coef, epsilon=config.eps_low, epsilon_high=config.eps_high,
        num_iterations=config.ppo_epochs, loss_type="dr_grpo", scale_rewards="group", max_steps=config.steps,
        seed=config.seed, bf16=config.bf16, use_cpu=device == "cpu",
        use_vllm=use_vllm, vllm_mode="colocate", save_strategy="no", logging_steps=1, report_to="none",
        disable_tqdm=not progress, shuffle_dataset=False, dataloader_num_workers=0,
        **({"gradient_checkpointing": True} if config.gradient_checkpointing else {}))


def trainer(config: TrainConfig, task: Task, *, use_vllm: bool = False, progress: bool = False, callbacks=()):
    """A GRPOTrainer over the task's m-answer prompts with the set-score reward of `config.algo`."""
    from trl import GRPOTrainer

    if config.algo not in ALGOS:
        raise UserError(f"--engine trl runs {', '.join(ALGOS)} (a group z-score of one score per rollout); got {config.algo}")
    m = answers_for(config.algo, config.answers)
    instances = task.instances("train", config.prompts * config.steps, seed=config.seed)
    check_template(task, instances[0], config.algo, m)
    model, tokenizer = models.load(config.init, models.ModelOptions(device="cpu"))
    chat = bool(getattr(tokenizer, "chat_template", None)) if config.chat is None else config.chat
    models.prompt_encoder(tokenizer, config.chat)  # a --chat without a template fails here, in one line
    eos = model.generation_config.eos_token_id if model.generation_config.eos_token_id is not None else tokenizer.eos_token_id
    reward = SetReward(task, instances, config.algo, m, seed=config.seed, options=config.options,
                       eos_ids=eos if isinstance(eos, (list, tuple)) else [eos])
    peft = None
    if config.lora_rank:
        from peft import LoraConfig

        peft = LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, lora_dropout=0.0, target_modules="all-linear")
    return GRPOTrainer(model=model, reward_funcs=reward, args=grpo_config(config, use_vllm=use_vllm, progress=progress),
                       train_dataset=dataset(task, instances, m, chat), processing_class=tokenizer,
                       callbacks=list(callbacks), peft_config=peft)


def metrics_callback(out: Path, records: list[dict], rollouts: int):
    """A TrainerCallback appending TRL's per-step logs to out/metrics.jsonl (and to `records`),
    with the step's wall time and completion tokens/s (`rollouts` completions per step)."""
    from transformers import TrainerCallback

    class Metrics(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            self.started = time.perf_counter()

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs and state.is_world_process_zero:
                record = {"step": state.global_step, **{k: float(v) for k, v in logs.items() if isinstance(v, (int, float))}}
                record["seconds"] = time.perf_counter() - self.started
                record["tokens_per_s"] = record.get("completions/mean_length", 0.0) * rollouts / record["seconds"]
                records.append(record)
                with open(out / "metrics.jsonl", "a") as handle:
                    handle.write(json.dumps(record) + "\n")

    return Metrics()


def run(config: TrainConfig, *, use_vllm: bool = False, progress: bool = True, task: Task | None = None) -> list[dict]:
    """Train with TRL's GRPOTrainer; writes a Hugging Face directory (merged weights), metrics.jsonl
    and train_config.json to `config.out`; returns the per-step records."""
    from training import checkpoint
    from training.trainer import get_task

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    task = task if task is not None else get_task(config.task)
    records: list[dict] = []
    grpo = trainer(config, task, use_vllm=use_vllm, progress=progress, callbacks=[metrics_callback(out, records, config.prompts * config.group)])
    grpo.train()
    if grpo.accelerator.is_main_process:  # under accelerate launch, one process writes
        config.save(out)
        checkpoint.export(models.merged(grpo.accelerator.unwrap_model(grpo.model)).to("cpu"), grpo.processing_class, out, half=False)
    return records
