"""The RL trainer: rollouts -> advantages (any registered estimator) -> PPO-clip updates.

Everything random is seeded from (seed, step), so a run resumed from a checkpoint produces
the same metrics as an uninterrupted one. Read `run` top to bottom: it is the whole loop.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tqdm import tqdm

import tasks
from evo import metrics
from evo.errors import UserError, WorkFailed
from evo.policies.prompt_format import PromptFormat
from evo.scores import scalarize
from tasks.base import GoalConditioned, Similar
from tasks.completions import Scoring
from training import advantages, checkpoint, diversity, memory, models, optimizer, planner, precision, rates, search_signal
from training.config import TrainConfig
from training.loss import head_parts, ppo_clip_loss, tis_weights, token_logprobs
from training.rollouts import BatchScored, Rollouts, check_template, collect

if TYPE_CHECKING:
    from training.engines import VLLMSampler


MEASURED = ("seconds", "rollout_seconds", "update_seconds", "sync_seconds", "sync_check_seconds", "sleep_seconds",
            "wake_seconds", "peak_memory_gib", "tokens_per_s")  # not seeded


@dataclass
class State:
    config: TrainConfig
    task: tasks.Task | None  # what `evo train` samples; None for the online learner (the search samples)
    model: torch.nn.Module
    tokenizer: object
    optimizer: torch.optim.Optimizer
    reference: torch.nn.Module | None
    step: int  # finished steps
    sampler: VLLMSampler | None = None  # None: the local Sampler
    encode: Callable | None = None  # prompt texts -> token ids (config.prompt_format's encoder)
    memory: planner.MemoryPlan | None = None  # micro-batches from a token budget (planned at step 1 when micro_batches is 0)


def get_task(name: str) -> tasks.Task:
    try:
        return tasks.get(name)
    except tasks.UnknownTask as error:
        raise UserError(str(error)) from None


def setup(config: TrainConfig, resume: bool, task: tasks.Task | None = None,
          plan: precision.Precision | None = None) -> State:
    """Load the task, the model (from `init`, or from `out` when resuming) and the optimizer.
    `plan`: the dtypes to train in (None: `precision_plan` of the config's device)."""
    out = Path(config.out)
    task = task if task is not None else get_task(config.task)
    m = config.set_size
    check_template(task, task.instances("train", 1, seed=config.seed)[0], config.algo, m)
    check_diversity(task, config)
    if config.rollouts == "vllm":
        from evo.policies.vllm_engine import import_vllm
        from training.engines import sleep_mode

        sleep_mode(models.resolve_device(config.device), config.vllm_sleep, config.vllm_options)  # refused on CPU
        import_vllm()  # before any work: a missing vLLM is one line
    if resume and config.lora_rank:
        raise UserError("a LoRA run cannot be resumed (its checkpoints hold merged weights); start a new run from --out")
    if resume:
        checkpoint.recover(out)  # a save killed half-way: finished or dropped, never mixed
    start = str(out) if resume else config.init
    plan = plan or precision_plan(config, start)
    if plan.warning:
        print(f"warning: {plan.warning}", file=sys.stderr, flush=True)
    model, tokenizer = models.load(start, config.model_options, dtype=plan.weights)
    if resume:
        checkpoint.load_masters(out, model)  # exactly the weights the run stopped with (its export may be 16-bit)
    prompt = PromptFormat.chosen(tokenizer, config.init, chat=config.chat, system=config.system)  # recorded by config.save
    config = rates.resolved(replace(config, bf16=plan.autocast, weight_dtype=precision.dtype_name(plan.weights),
                                    chat=prompt.chat, system=prompt.system), rates.parameters(model))
    head_parts(model)  # the head check, once, before step 1 (a head it cannot split is warned about here)
    encode = partial(prompt.encode, tokenizer)
    if not config.max_new_tokens:  # a task that is not a family with demonstrations (a spec) says its own
        budget = task.token_budget(tokenizer, m) if hasattr(task, "token_budget") else token_budget(task, tokenizer, m, seed=config.seed)
        config = replace(config, max_new_tokens=budget)
    trainer = trained_state(config, task, model, tokenizer, plan, encode=encode)
    if resume:
        state = checkpoint.load_state(out)
        optimizer.load(trainer.optimizer, state["optimizer"])
        trainer.step = state["step"]
        checkpoint.truncate_metrics(out, trainer.step)
    if config.rollouts == "vllm":
        from training.engines import VLLMSampler

        trainer.sampler = VLLMSampler.start(model, tokenizer, str(out) if resume else config.init, sync_every=config.sync_every,
                                            bf16=bool(plan.autocast), sleep=config.vllm_sleep, engine=config.vllm_options)
    check_memory(trainer)
    return trainer


def trained_state(config: TrainConfig, task: tasks.Task | None, model: torch.nn.Module, tokenizer: object,
                  plan: precision.Precision, encode: Callable | None = None) -> State:
    """Step 0 of training `model` (loaded from `config.init` in `plan`'s dtypes): its AdamW and
    its KL reference (None at kl_coef 0; LoRA's base is the model itself with its adapters off,
    no second copy; else `config.init` again, frozen). `evo train` (setup) and the online
    learner (training.online) both start here."""
    adamw = optimizer.adamw(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    reference = None
    if config.kl_coef > 0:
        reference = model if config.lora_rank else models.load(
            config.init, replace(config.model_options, lora_rank=0, gradient_checkpointing=False), dtype=plan.frozen)[0]
    return State(config, task, model, tokenizer, adamw, reference, 0, None, encode)


def precision_plan(config: TrainConfig, path: str) -> precision.Precision:
    """The dtypes of a run of `config` from the checkpoint in `path`, on the config's device."""
    return precision.plan(models.resolve_device(config.device), precision.checkpoint_dtype(path),
                          lora=bool(config.lora_rank), setting=config.weight_dtype, bf16=config.bf16)


def token_budget(task: tasks.Task, tokenizer: Any, m: int, *, seed: int = 0, count: int = 16) -> int:
    """The default --max-new-tokens: 1.5x the longest of `count` demonstrations of an m-answer
    completion in this tokenizer's tokens, plus room for the end token (rounded up to 8). A
    demonstration is counted as the model writes it: no special tokens, no chat template around it."""
    rng = np.random.default_rng(seed)
    texts = [task.demonstrations(instance, m, rng) for instance in task.instances("train", count, seed=seed)]
    longest = max(len(ids) for ids in tokenizer(texts, add_special_tokens=False).input_ids)
    return int(math.ceil((1.5 * longest + 1) / 8) * 8)


def check_diversity(task: tasks.Task, config: TrainConfig) -> None:
    """--diversity-coef needs a task that compares answers and a single-answer estimator."""
    if not config.diversity_coef:
        return
    if not isinstance(task, Similar):
        raise UserError(f"--diversity-coef needs a task with a similarity(instance, a, b) method; {task.name!r} has none")
    if advantages.entry(config.algo).multi_answer:
        raise UserError(f"--diversity-coef is for single-answer estimators; {config.algo} trains on sets of answers")


def seeds(config: TrainConfig, step: int) -> tuple[int, int, np.random.Generator]:
    """Instance seed, sampling seed and the estimator's generator of one step."""
    base = config.seed * 1_000_003 + step
    return base, base * 7 + 1, np.random.default_rng([config.seed, step])


def scoring_for(config: TrainConfig) -> Scoring:
    """The training reward's scoring rules: repeats score zero; answers one by one with --score-by-answer."""
    return Scoring(dedup=True, by_answer=config.score_by_answer)


@dataclass(frozen=True)
class Batch:
    """One step's training data: the rollouts, and what the estimator takes besides them."""

    rolls: Rollouts
    rewards: np.ndarray  # (B, G, m, d) what the estimator sees (the rollouts' rewards, shaped)
    objectives: tuple[str, ...]
    weights: np.ndarray  # (d,) the deployment scalar's weights
    rng: np.random.Generator  # the estimator's draws of this step
    extra: dict  # `goals` for a goal-conditioned estimator, `front` for one scored against the front F


def sample(state: State) -> Batch:
    """`evo train`'s rollouts: the task's training prompts of this step, sampled and scored."""
    config, task = state.config, state.task
    assert task is not None, "evo train samples a task"
    instance_seed, sample_seed, rng = seeds(config, state.step)
    instances = task.instances("train", config.prompts, seed=instance_seed)
    prompts, goals = goal_prompts(state, instances)
    with autocast(config):
        rolls = collect(state.model, state.tokenizer, task, instances, m=config.set_size, group=config.group,
                        max_new_tokens=config.max_new_tokens, temperature=config.temperature,
                        top_p=config.top_p, seed=sample_seed, prompts=prompts, sampler=state.sampler, encode=state.encode,
                        scoring=scoring_for(config))
    extra: dict = {} if goals is None else {"goals": goals}
    if advantages.entry(config.algo).front and isinstance(task, BatchScored):
        extra["front"] = task.front(instances)  # each prompt's front F (vpo_front)
    return Batch(rolls, shaped_rewards(state, rolls), tuple(task.objectives), np.asarray(task.weights, dtype=np.float64),
                 rng, extra)


def estimate(state: State, batch: Batch) -> np.ndarray:
    """(B, G) advantages of a step's batch under the run's estimator and its options."""
    config = state.config
    return advantages.compute(config.algo, batch.rewards, weights=batch.weights, rng=batch.rng, **batch.extra,
                              **config.options)


def rollout(state: State) -> tuple[Rollouts, np.ndarray]:
    """`evo train`'s rollouts of the next step and their advantages (what train_step updates on)."""
    batch = sample(state)
    return batch.rolls, estimate(state, batch)


def goal_prompts(state: State, instances: list) -> tuple[list[str] | None, np.ndarray | None]:
    """For a goal-conditioned estimator: each instance's prompt showing a Dirichlet(1)
    weighting, and the (B, d) weightings the prompts show (one per prompt group, so the
    group's rollouts answer, and are compared under, the same request). (None, None) else."""
    if not advantages.entry(state.config.algo).goal_conditioned:
        return None, None
    task = state.task
    if task is None or not isinstance(task, GoalConditioned):
        raise UserError(f"--algo {state.config.algo} shows a weighting in the prompt: task {state.config.task!r} "
                        "has no prompt_with_weights; pick another estimator")
    rng = np.random.default_rng([state.config.seed, state.step, 1])
    drawn = rng.dirichlet(np.ones(len(task.objectives)), size=len(instances))
    shown = [task.prompt_with_weights(instance, w) for instance, w in zip(instances, drawn)]
    return [prompt for prompt, _ in shown], np.array([w for _, w in shown])


def shaped_rewards(state: State, rolls: Rollouts) -> np.ndarray:
    """The rewards the estimator sees: with --diversity-coef, scaled by each answer's distance
    to its group (training/diversity.py); otherwise the scored rewards themselves."""
    if not state.config.diversity_coef:
        return rolls.rewards
    task = state.task
    if task is None or not isinstance(task, Similar):  # checked with the flags (TrainConfig / get_task); kept for the type
        raise UserError(f"--diversity-coef needs a task with a similarity of two answers; {state.config.task!r} has none")
    similarity = diversity.rollout_similarity(task, rolls)
    return diversity.diversity_scaled(rolls.rewards, similarity, state.config.diversity_coef)


def autocast(config: TrainConfig):
    return models.autocast(models.resolve_device(config.device), bool(config.bf16))


def chunks(total: int, parts: int) -> list[torch.Tensor]:
    return list(torch.arange(total).tensor_split(parts))


def micro_batches(state: State, rolls: Rollouts) -> list[torch.Tensor]:
    """The step's rows in micro-batches: the memory plan's token budget, or --micro-batches equal chunks."""
    if state.memory is not None:
        return state.memory.split(rolls.samples)
    return chunks(rolls.samples.completion_ids.shape[0], state.config.micro_batches or 1)


def room(state: State) -> int:
    """What the device can give the trainer now, less what vLLM's engine took when it started."""
    engine = state.sampler
    return memory.free_bytes(next(state.model.parameters()).device) - (engine.engine_bytes if engine is not None else 0)


def capacity(state: State) -> int:
    """The update's memory budget: --memory-gib, else BUDGET_SHARE of `room`."""
    config = state.config
    return int(config.memory_gib * memory.GIB) if config.memory_gib else int(planner.BUDGET_SHARE * room(state))


def check_memory(state: State) -> None:
    """Before any sampling: the weights, moments, reference and optimizer step fit the update's
    budget, and the resident part fits beside vLLM's engine while it samples (one line if not)."""
    awake = int(planner.BUDGET_SHARE * room(state)) if state.sampler is not None else None
    planner.check_states(state.model, state.reference, capacity=capacity(state),
                         step_transient=optimizer.step_bytes(state.optimizer), awake=awake)


def plan_memory(state: State, rolls: Rollouts) -> planner.MemoryPlan:
    """The memory plan of this run's steps, from the first step's prompt width (one line on stderr)."""
    config, samples = state.config, rolls.samples
    prompt = int(samples.prompt_mask.any(0).sum())
    engine = state.sampler  # vLLM's engine: asleep now (the plan's room is then the engine's too), or awake beside the update
    plan = planner.plan(state.model, state.reference, rollouts=samples.completion_ids.shape[0], group=config.group,
                        prompt=prompt, completion=config.max_new_tokens, capacity=capacity(state),
                        checkpointing=config.gradient_checkpointing, entropy=config.entropy_coef > 0,
                        autocast=lambda: autocast(config), enable_checkpointing=lambda: models.enable_checkpointing(state.model),
                        step_transient=optimizer.step_bytes(state.optimizer))
    beside = "" if engine is None else "; vLLM asleep during the update" if engine.sleeps else "; vLLM awake beside the update"
    print(plan.line(samples.completion_ids.shape[0], prompt + config.max_new_tokens) + beside, file=sys.stderr, flush=True)
    return plan


@torch.no_grad()
def frozen_logprobs(model: torch.nn.Module, rolls: Rollouts, config: TrainConfig, parts: list[torch.Tensor], *,
                    base: bool = False) -> torch.Tensor:
    """The rollouts' log-probs under `model` (`base`: its LoRA adapters switched off)."""
    with autocast(config), models.adapters_off(model, base):
        return torch.cat([token_logprobs(model, rolls.samples, r)[0] for r in parts])


def update(state: State, rolls: Rollouts, adv: np.ndarray) -> dict:
    """PPO epochs over the step's rollouts, each one optimizer step with accumulated gradients."""
    config, samples = state.config, rolls.samples
    total = samples.completion_ids.shape[0]
    mask = samples.completion_mask.float()
    advantage = torch.tensor(adv.reshape(-1), dtype=torch.float32, device=mask.device)
    batches = micro_batches(state, rolls)
    old = frozen_logprobs(state.model, rolls, config, batches) if config.ppo_epochs > 1 else None
    ref = None if state.reference is None else frozen_logprobs(state.reference, rolls, config, batches,
                                                               base=state.reference is state.model)
    entropy = config.entropy_coef > 0  # the token entropies cost a softmax over the vocabulary
    sums = {"clipped": 0.0, "entropy": 0.0, "kl": 0.0, "loss": 0.0, "grad_norm": 0.0, "tis_weight": 0.0, "tis_capped": 0.0}
    for _ in range(config.ppo_epochs):
        state.optimizer.zero_grad(set_to_none=True)
        for rows in batches:
            with autocast(config):
                logp, token_entropy = token_logprobs(state.model, samples, rows, entropy=entropy)
            before = old[rows] if old is not None else logp.detach()
            weights = tis_weights(before, samples.logprobs[rows], config.tis_cap) if config.tis_cap else None
            parts = ppo_clip_loss(
                logp, token_entropy, before, advantage[rows], mask[rows],
                eps_low=config.eps_low, eps_high=config.eps_high, normalizer=total * config.norm,
                ref_logp=None if ref is None else ref[rows], kl_coef=config.kl_coef,
                entropy_coef=config.entropy_coef, is_weights=weights,
            )
            if weights is not None:
                sums["tis_weight"] += float((weights * mask[rows]).sum())
                sums["tis_capped"] += float(((weights >= config.tis_cap).float() * mask[rows]).sum())
            parts.loss.backward()
            for key in ("clipped", "entropy", "kl"):
                sums[key] += getattr(parts, key)
            sums["loss"] += float(parts.loss.detach())
        norm = float(torch.nn.utils.clip_grad_norm_(state.optimizer.param_groups[0]["params"], config.max_grad_norm))
        if not (math.isfinite(sums["loss"]) and math.isfinite(norm)):  # before AdamW writes NaN into every weight
            raise not_finite(state.step + 1, {"loss": sums["loss"], "grad_norm": norm, "advantage_abs": float(np.abs(adv).mean())})
        sums["grad_norm"] += norm
        state.optimizer.step()
    state.optimizer.zero_grad(set_to_none=True)  # the gradients' memory is free while the next step samples
    tokens = float(mask.sum()) * config.ppo_epochs
    record = {
        "loss": sums["loss"] / config.ppo_epochs,
        "grad_norm": sums["grad_norm"] / config.ppo_epochs,
        "kl": sums["kl"] / max(tokens, 1.0) if state.reference is not None else None,  # not measured without one
        "clip_fraction": sums["clipped"] / max(tokens, 1.0),
    }
    if entropy:
        record["entropy"] = sums["entropy"] / max(tokens, 1.0)
    if config.tis_cap:  # the mean truncated weight and the share of tokens at the cap
        record.update(tis_weight=sums["tis_weight"] / max(tokens, 1.0), tis_capped=sums["tis_capped"] / max(tokens, 1.0))
    return record


def not_finite(step: int, record: dict) -> UserError:
    """The one line for a step whose figures are not finite: nothing of it was applied or saved."""
    bad = ", ".join(f"{k}={v}" for k, v in record.items() if isinstance(v, float) and not math.isfinite(v))
    return UserError(f"step {step}: non-finite {bad}; the step was not applied and the last saved state is kept: "
                     "lower lr, or check the estimator options and the task's rewards")


def reward_metrics(batch: Batch, adv: np.ndarray) -> dict:
    """The step record's reward figures; each key means one thing on every training path:
    `scalar` the mean scalar over every answer, `best_in_set` the mean over completions of the
    best answer's scalar (equal to `scalar` for one answer per completion), `reward/NAME` an
    objective's mean, the KINDS shares what the completions became."""
    rolls = batch.rolls
    rewards = rolls.rewards  # (B, G, m, d)
    b, g, m, d = rewards.shape
    scalars = scalarize(rewards, batch.weights)
    record = {f"reward/{name}": float(rewards[..., j].mean()) for j, name in enumerate(batch.objectives)}
    record.update({
        "scalar": float(scalars.mean()),
        "best_in_set": float(scalars.max(axis=2).mean()),
        "diversity": float(np.mean([metrics.diversity(rewards[i].reshape(g * m, d)) for i in range(b)])),
        "parse_failed": float(rolls.parse_failed.mean()),
        "truncated": float(rolls.truncated.mean()),
        "length": float(rolls.samples.completion_mask.sum(1).float().mean()),
        "advantage_abs": float(np.abs(adv).mean()),
        **search_signal.shares(rolls.kinds),
    })
    return record


def train_step(state: State, collect: Callable[[State], Batch] = sample) -> dict:
    """The one training step: rollouts and rewards (`collect`: `evo train` samples its task; the
    online learner gives the search's proposals) -> advantages -> update -> record, each timed.
    vLLM rollouts: the engine sleeps through the update and gets the new weights after it."""
    device = next(state.model.parameters()).device
    memory.reset_peak(device)
    started = time.perf_counter()
    batch = collect(state)
    config = state.config
    adv = estimate(state, batch)
    if state.sampler is not None:
        state.sampler.sleep(state.step + 1)  # vLLM's engine frees the GPU for the update (where it sleeps)
    if state.memory is None and not config.micro_batches:
        state.memory = plan_memory(state, batch.rolls)
    rolled = time.perf_counter()
    record = {"step": state.step + 1, **reward_metrics(batch, adv), **update(state, batch.rolls, adv)}
    updated = time.perf_counter()
    if state.sampler is not None:
        record.update(state.sampler.after_update(state.step + 1))
    finished = time.perf_counter()
    # the vLLM sampler's check after a sync, and its engine's sleep (after sampling) and wake (around the push)
    check, slept, woke = (record.get(key, 0.0) for key in ("sync_check_seconds", "sleep_seconds", "wake_seconds"))
    record.update(seconds=finished - started, rollout_seconds=rolled - started - slept, update_seconds=updated - rolled,
                  sync_seconds=finished - updated - check - woke, sync_check_seconds=check, sleep_seconds=slept,
                  wake_seconds=woke, peak_memory_gib=memory.peak_gib(device))
    record["tokens_per_s"] = float(batch.rolls.samples.completion_mask.sum()) / record["seconds"]
    state.step += 1
    return record


def finite(record: dict) -> bool:
    """Whether every figure of a step record is finite (None: not measured)."""
    return all(v is None or math.isfinite(v) for v in record.values() if not isinstance(v, (list, str)))


def run(config: TrainConfig, *, resume: bool = False, progress: bool = True, task: tasks.Task | None = None) -> list[dict]:
    """Train until `config.steps` finished steps; checkpoint every `save_every` and at the end."""
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(config.seed)
    state = setup(config, resume, task)
    config = state.config  # with the token budget resolved
    config.save(out)
    if not resume:  # a start killed before its first checkpoint logged steps that run again now
        checkpoint.truncate_metrics(out, 0)
    records = []
    exported = precision.checkpoint_dtype(config.init)  # the dtype the model came in is the one it goes out in
    bar = tqdm(total=config.steps, initial=state.step, disable=not progress, desc=f"{config.algo}", unit="step")
    while state.step < config.steps:
        record = train_step(state)
        if not finite(record):
            raise not_finite(record["step"], record)
        checkpoint.append_metrics(out, record)
        records.append(record)
        idle = search_signal.idle_cause(records, config.idle_steps)
        if config.snapshot_every and state.step % config.snapshot_every == 0:
            checkpoint.snapshot(out, state.model, state.tokenizer, state.step, exported)
        if state.step % config.save_every == 0 or state.step == config.steps or idle:
            checkpoint.save(out, state.model, state.tokenizer, state.optimizer, state.step, exported)
        if idle:  # what it has is saved: the one line, and the run stops
            raise WorkFailed(f"{idle}; training stopped at step {state.step}, saved in {out} "
                             f"(evo train --out {out} --resume continues it)")
        bar.update(1)
        bar.set_postfix(scalar=f"{record['scalar']:.3f}", div=f"{record['diversity']:.3f}")
    bar.close()
    return records
