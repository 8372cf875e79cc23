"""VPO in veRL: the set-score reward and the project's group z-score as veRL estimators.

`register()` adds `evo_grpo`, `evo_multi_rlvr`, `evo_random_weight_grpo` and `evo_vpo` to
veRL's `register_adv_est` registry: one function, the group z-score (population std, zero when
the std is below 1e-6) of the one score per rollout that `compute_score` returns. Point veRL's
`custom_reward_function.path` at this file (`name: compute_score`) and set
`algorithm.adv_estimator=evo_vpo`; `rows()` builds the dataset rows (veRL reads them from parquet).

veRL's reward call sees neither the step nor the eos token: the weightings come from (seed,
instance) and a completion is scored as finished (veRL's response length limit still cuts).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

import tasks
from tasks.completions import score_completion
from training.advantages import zscore
from training.integrations.set_reward import ALGOS, group_weightings, set_score


def group_zscore(token_level_rewards, response_mask, index, epsilon: float = 1e-6, config=None, **_):
    """veRL estimator signature: (advantages, returns), both (N, T), from outcome rewards grouped by uid."""
    import torch

    scores = token_level_rewards.sum(-1).double().cpu().numpy()
    index = np.asarray(index)
    out = np.zeros_like(scores)
    for uid in np.unique(index):
        rows = index == uid
        out[rows] = zscore(scores[rows], epsilon)
    advantages = torch.tensor(out, dtype=token_level_rewards.dtype, device=token_level_rewards.device)[:, None] * response_mask
    return advantages, advantages


def register() -> list[str]:
    """Register the estimators with veRL (idempotent); returns their names."""
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, register_adv_est

    names = [f"evo_{algo}" for algo in ALGOS]
    for name in names:
        if name not in ADV_ESTIMATOR_REGISTRY:
            register_adv_est(name)(group_zscore)
    return names


@lru_cache(maxsize=8)
def _instances(task: str, split: str, count: int, seed: int) -> tuple:
    return tuple(tasks.get(task).instances(split, count, seed=seed))


def rows(task_name: str, algo: str, *, count: int, m: int = 3, seed: int = 0, options: dict | None = None) -> list[dict]:
    """Dataset rows in veRL's schema, one per training instance (its m-answer prompt as a user message)."""
    task = tasks.get(task_name)
    m = m if algo in ("vpo", "multi_rlvr") else 1
    info = {"task": task_name, "count": count, "seed": seed, "algo": algo, "m": m, "options": dict(options or {})}
    return [{"data_source": f"evo/{task_name}", "prompt": [{"role": "user", "content": task.prompt(instance, m)}],
             "reward_model": {"style": "rule", "ground_truth": ""}, "extra_info": {**info, "index": i}}
            for i, instance in enumerate(_instances(task_name, "train", count, seed))]


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **_) -> float:
    """veRL custom reward: the rollout's set score under its group's shared weightings."""
    info = extra_info
    task = tasks.get(info["task"])
    instance = _instances(info["task"], "train", info["count"], info["seed"])[info["index"]]
    matrix, _ = score_completion(task, instance, solution_str, True, info["m"])
    w = group_weightings(info["algo"], len(task.objectives), info["seed"], 0, info["index"], info["options"])
    return set_score(info["algo"], matrix, np.asarray(task.weights, dtype=np.float64), w)
