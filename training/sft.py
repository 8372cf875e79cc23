"""The supervised warm-up: a tiny causal LM trained from scratch on a task's demonstrations.

Each example is the prompt in the model's prompt format (`<bos> prompt` for plain text, the
chat template's rendering otherwise; evo.policies.prompt_format), then `completion <eos>`, with
the loss on the completion only; a
`multi_fraction` share of the examples uses the m-answer prompt, the rest the single-answer
one, so the warm-up model answers both templates. Training instances come from a fixed,
seeded pool; each example draws fresh demonstrations, so the model sees varied answers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from evo import metrics
from evo.errors import UserError
from evo.policies.base import Completion
from evo.policies.prompt_format import PLAIN, PromptFormat
from evo.policies.sampler import Sampler, context_length
from evo.scores import scalarize
from tasks.base import Instance, Task
from tasks.completions import score_many
from training.models import autocast


@dataclass(frozen=True)
class SFTConfig:
    # defaults of `evo pretrain`: the settings the shipped warm-ups were trained with
    steps: int = 700
    batch_size: int = 24
    lr: float = 3e-3
    warmup: int = 100
    decay_steps: int = 0  # length of the cosine schedule (0: `steps`; more: stop before its end)
    weight_decay: float = 0.01
    multi_fraction: float = 0.6  # share of examples in the m-answer template
    m: int = 3
    pool: int = 2000  # training instances
    length_groups: int = 4  # forward passes per step, over examples sorted by length (less padding)
    seed: int = 0
    threads: int = 2


def encode(tokenizer, prompt: str, completion: str, prompt_format: PromptFormat = PLAIN) -> tuple[list[int], int]:
    """Token ids of the prompt in `prompt_format` (plain: `<bos> prompt`), then `completion <eos>`;
    and the number of prompt tokens."""
    head = prompt_format.encode(tokenizer, [prompt])[0]
    tail = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return head + tail, len(head)


def collate(examples: Sequence[tuple[list[int], int]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded ids, attention mask and labels (-100 on the prompt and the padding)."""
    width = max(len(ids) for ids, _ in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for row, (tokens, prompt_len) in enumerate(examples):
        ids[row, : len(tokens)] = torch.tensor(tokens)
        labels[row, prompt_len : len(tokens)] = torch.tensor(tokens[prompt_len:])
        mask[row, : len(tokens)] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def sample_batch(task: Task, pool: Sequence[Instance], tokenizer, config: SFTConfig,
                 rng: np.random.Generator, prompt_format: PromptFormat = PLAIN) -> list[tuple[list[int], int]]:
    examples = []
    for index in rng.integers(len(pool), size=config.batch_size):
        m = config.m if rng.random() < config.multi_fraction else 1
        instance = pool[index]
        examples.append(encode(tokenizer, task.prompt(instance, m), task.demonstrations(instance, m, rng), prompt_format))
    return examples


def micro_batches(examples: Sequence[tuple[list[int], int]], pad_id: int, groups: int) -> list[dict[str, torch.Tensor]]:
    """The examples sorted by length and cut into `groups` collated batches, so that short
    ones (a single-answer demonstration) are not padded to the longest (an m-answer one)."""
    ordered = sorted(examples, key=lambda example: len(example[0]))
    return [collate([ordered[i] for i in chunk], pad_id)
            for chunk in np.array_split(np.arange(len(ordered)), min(groups, len(ordered)))]


def learning_rate(step: int, config: SFTConfig) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    length = config.decay_steps or config.steps
    progress = min(1.0, (step - config.warmup) / max(1, length - config.warmup))
    return config.lr * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


def train(model, tokenizer, task: Task, config: SFTConfig, on_step: Callable[[int, float], None] = lambda step, loss: None,
          *, bf16: bool = False, prompt_format: PromptFormat = PLAIN):
    """Train `model` in place, on its device, on `task`'s demonstrations; returns the list of
    losses. `bf16`: forwards under bfloat16 autocast (the weights, and so AdamW's moments,
    keep their dtype: float32 masters with bf16 compute, training/precision.py); `prompt_format`:
    how the prompts are encoded (the checkpoint then records it)."""
    torch.set_num_threads(config.threads)
    device = next(model.parameters()).device
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    pool = task.instances("train", config.pool, seed=config.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, betas=(0.9, 0.95))
    context = context_length(model)
    model.train()
    losses = []
    for step in range(config.steps):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, config)
        batches = micro_batches(sample_batch(task, pool, tokenizer, config, rng, prompt_format), tokenizer.pad_token_id,
                                config.length_groups)
        width = max(batch["input_ids"].shape[1] for batch in batches)
        if context is not None and width > context:
            raise UserError(f"a {task.name} demonstration takes {width} tokens, more than the "
                            f"model's context of {context}; pass a larger --context")
        # the mean over all completion tokens of the step, as one padded batch would give it
        counts = [int((batch["labels"] != -100).sum()) for batch in batches]
        optimizer.zero_grad(set_to_none=True)
        loss = 0.0
        for batch, count in zip(batches, counts):
            with autocast(str(device), bf16):
                part = model(**{key: value.to(device) for key, value in batch.items()}).loss * (count / sum(counts))
            part.backward()
            loss += part.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss)
        on_step(step, losses[-1])
    model.eval()
    return losses


def sample(model, tokenizer, prompts: Sequence[str], n: int, max_new_tokens: int,
           temperature: float = 1.0, seed: int = 0, prompt_format: PromptFormat = PLAIN) -> list[list[Completion]]:
    """`n` sampled completions per prompt (text after the prompt, cut at eos, with its finish reason)."""
    return Sampler(model, tokenizer, prompt_format=prompt_format).sample(list(prompts), n=n, max_new_tokens=max_new_tokens,
                                            temperature=temperature, seed=seed).completions


def score_completions(task: Task, instance: Instance, completions: Sequence[Completion], m: int) -> tuple[np.ndarray, int]:
    """Reward rows of all answers under the shared completion rules (tasks.completions: an
    unparseable or truncated completion gives m zero rows, repeated answers zero rows) and the
    number of completions that parsed."""
    matrices, parsed = score_many(task, [(instance, c.text, c.finish_reason == "stop") for c in completions], m)
    return matrices.reshape(-1, len(task.objectives)), int(parsed.sum())


def evaluate(model, tokenizer, task: Task, instances: Sequence[Instance], *, samples: int = 30, m: int = 1,
             max_new_tokens: int = 160, temperature: float = 1.0, seed: int = 0, oracle: bool = False,
             weightings: int = 256, prompt_format: PromptFormat = PLAIN,
             on_instance: Callable[[], None] = lambda: None) -> dict[str, float]:
    """Held-out quality of `samples` completions per instance in the `m`-answer template
    (`on_instance` is called as each instance is done: a progress bar):
    parse rate (of completions), the rate of answers with a non-zero reward (for the maze:
    reaching the exit), mean scalar, and best@k over the k = samples * m answers.

    With `oracle` (the task's `oracle_best` and `oracle_front`): the oracle's mean best
    scalar, best@k as a fraction of it, the share of instances whose best@k reaches it
    (`solved_at_k`), and `front_coverage_at_k`: under `weightings` Dirichlet(1) weightings,
    the best answer's weighted score as a fraction of the front's best (the trade-offs that
    VPO trains for; 1 = every weighting is served optimally)."""
    dirichlet = np.random.default_rng(seed).dirichlet(np.ones(len(task.objectives)), size=weightings)
    started = time.time()
    parsed = nonzero = total = answers = 0
    scalars, bests, optimum, coverage = [], [], [], []
    for i, instance in enumerate(instances):
        completions = sample(model, tokenizer, [task.prompt(instance, m)], samples, max_new_tokens, temperature, seed + i,
                             prompt_format)[0]
        rows, ok = score_completions(task, instance, completions, m)
        values = scalarize(rows, task.weights)
        parsed, total = parsed + ok, total + len(completions)
        nonzero += int(np.any(rows > 0, axis=1).sum())
        answers += len(rows)
        scalars.append(values.mean())
        bests.append(values.max())
        if oracle:
            optimum.append(task.oracle_best(instance))
            coverage.append(metrics.front_coverage(rows, task.oracle_front(instance), dirichlet))
        on_instance()
    k = samples * m
    result = {
        "instances": len(instances), "samples": samples, "m": m, "temperature": temperature,
        "parse_rate": parsed / total, "nonzero_rate": nonzero / answers,
        "mean_scalar": float(np.mean(scalars)), f"best_at_{k}": float(np.mean(bests)),
        "eval_seconds": round(time.time() - started, 1),
    }
    if oracle:
        result["oracle_best"] = float(np.mean(optimum))
        result[f"best_at_{k}_over_oracle"] = float(np.mean(bests) / np.mean(optimum))
        result[f"solved_at_{k}"] = float(np.mean(np.array(bests) >= np.array(optimum) - 1e-9))
        result[f"front_coverage_at_{k}"] = float(np.nanmean(coverage))
    return result
