"""VPO in veRL: the set-score reward as veRL's `compute_score`, with veRL's own `grpo` estimator.

veRL's built-in `adv_estimator=grpo` is already the group z-score of one score per rollout
(grouped by the prompt's uid; (r - mean) / (sample std + 1e-6) with `norm_adv_by_std_in_grpo`),
so the estimator's advantage only needs the rollout's set score as its reward: vpo R(S), grpo
the answer's scalar, multi_rlvr the sum of the set's scalars, random_weight_grpo one Dirichlet
weighting's value (`training.integrations.set_reward`). The recipe:

    python -c "from training.integrations.verl import write; write('maze.parquet', 'maze', 'vpo', count=1024)"
    python -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_files=maze.parquet \
        actor_rollout_ref.rollout.n=8 reward.custom_reward_function.path=training/integrations/verl.py \
        reward.custom_reward_function.name=compute_score ...

veRL 0.9.1's reward managers (workers/reward_manager/naive.py, batch.py and the reward loop's
naive.py) pass compute_score neither the global step nor the eos token. The weightings are
redrawn per step by a per-process counter: the k-th time this process scores prompt `index`,
the step key is (k - 1) // group (`group` = actor_rollout_ref.rollout.n, written into
extra_info by `rows`), so a prompt's n rollouts of one step share one draw and the next
time the prompt is sampled draws anew. Assumption: one process scores every rollout of a
prompt's group, exactly n per step (the default NaiveRewardManager in one reward worker); with
rewards spread over several workers or a prompt repeated inside one batch the groups blur.
A completion is scored as finished (veRL's response length limit still cuts). The rows' `extra_info` is plain-typed (the estimator options travel
as a JSON string) so parquet writes it with default options.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

import tasks
from evo.errors import UserError
from evo.policies.prompt_format import PromptFormat
from tasks.completions import score_completion
from training.integrations.set_reward import check, group_weightings, set_score


@lru_cache(maxsize=8)
def _instances(task: str, split: str, count: int, seed: int) -> tuple:
    return tuple(tasks.get(task).instances(split, count, seed=seed))


def rows(task_name: str, algo: str, *, count: int, m: int = 3, seed: int = 0, options: dict | None = None,
         group: int = 8, init: str | None = None) -> list[dict]:
    """Dataset rows in veRL's schema, one per training instance (its m-answer prompt as chat
    messages); `group` must equal actor_rollout_ref.rollout.n. `init`: the checkpoint veRL trains
    (actor_rollout_ref.model.path), whose recorded system text the rows carry (None: none)."""
    check(algo, options or {}, who="veRL's compute_score")
    prompt = chat_format(init)
    task = tasks.get(task_name)
    m = m if algo in ("vpo", "multi_rlvr") else 1
    info = {"task": task_name, "count": count, "seed": seed, "algo": algo, "m": m, "options": json.dumps(options or {}),
            "group": group}
    return [{"data_source": f"evo/{task_name}", "prompt": prompt.messages(task.prompt(instance, m)),
             "reward_model": {"style": "rule", "ground_truth": ""}, "extra_info": {**info, "index": i}}
            for i, instance in enumerate(_instances(task_name, "train", count, seed))]


def write(path: str | Path, task_name: str, algo: str, *, count: int, m: int = 3, seed: int = 0,
          options: dict | None = None, group: int = 8, init: str | None = None) -> Path:
    """`rows()` as the parquet file veRL's `data.train_files` reads (needs pyarrow)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = rows(task_name, algo, count=count, m=m, seed=seed, options=options, group=group, init=init)
    pq.write_table(pa.Table.from_pylist(table), str(path))
    return Path(path)


def chat_format(init: str | None) -> PromptFormat:
    """The prompt format of veRL's rows: veRL renders every row with the chat template, so the
    checkpoint's must be the chat template (its record, else its tokenizer has one)."""
    if init is None:
        return PromptFormat(chat=True)
    from evo.policies import resolve_checkpoint
    from evo.policies.local import load_tokenizer

    path = resolve_checkpoint(init)
    prompt = PromptFormat.of_checkpoint(path, load_tokenizer(path))
    if not prompt.chat:
        raise UserError(f"{init} is prompted with plain text (its train_config.json's prompt, or no chat template); "
                        "veRL renders every row with the chat template: train it with --engine ours or trl")
    return prompt


_INT = (int, np.integer)  # (a reader may hand back numpy integers)
INFO_TYPES: dict[str, type | tuple[type, ...]] = {"task": str, "count": _INT, "seed": _INT, "algo": str, "m": _INT, "options": str, "index": _INT,
                                                    "group": _INT}  # `rows`' extra_info


def row_info(extra_info) -> dict:
    """A row's `extra_info`, as `rows` wrote it; anything else is a ValueError that says so."""
    info = extra_info if isinstance(extra_info, dict) else {}
    wrong = [key for key, kind in INFO_TYPES.items()
             if not isinstance(info.get(key), kind) or isinstance(info.get(key), bool)]
    if wrong:
        raise ValueError(f"compute_score needs each row's extra_info as training.integrations.verl.rows writes it "
                         f"({', '.join(INFO_TYPES)}); {', '.join(wrong)} missing or mistyped in {extra_info!r:.200}: "
                         "make the dataset with verl.write()")
    if not 0 <= info["index"] < info["count"]:
        raise ValueError(f"extra_info index {info['index']} is outside the dataset's {info['count']} rows")
    if info["group"] < 1:
        raise ValueError(f"extra_info group must be >= 1 (actor_rollout_ref.rollout.n), got {info['group']}")
    return info


_SCORED: dict[tuple, int] = {}  # (task, seed, count, index) -> rollouts of that prompt scored in this process


def step_key(info: dict) -> int:
    """The draw's step for this call: how many whole groups of this prompt this process scored before it."""
    key = (info["task"], info["seed"], info["count"], info["index"])
    seen = _SCORED.get(key, 0)
    _SCORED[key] = seen + 1
    return seen // info["group"]


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **_) -> float:
    """veRL custom reward: the rollout's set score under its group's shared weightings."""
    info = row_info(extra_info)
    task = tasks.get(info["task"])
    instance = _instances(info["task"], "train", info["count"], info["seed"])[info["index"]]
    matrix, _parsed = score_completion(task, instance, solution_str, True, info["m"])
    w = group_weightings(info["algo"], len(task.objectives), info["seed"], step_key(info), info["index"], json.loads(info["options"]))
    return set_score(info["algo"], matrix, np.asarray(task.weights, dtype=np.float64), w)
