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

Weightings keyed by what veRL passes each rollout's `compute_score`, never by process state:
veRL 0.9.1 streams every rollout to one of `reward.num_workers` reward-loop workers (8 by
default) picked at random (`experimental/agent_loop/agent_loop.py` `_compute_score`), and its
naive reward manager (`experimental/reward_loop/reward_manager/naive.py`) hands over the row's
`extra_info` merged with the rollout server's fields, among them `global_steps`: the version of
the weights that sampled the rollout (0 for step 1, t after the t-th update; vLLM, SGLang and
TRT-LLM servers set it at each weight sync). The draw's key is (seed, global_steps, the row's
index): every rollout of a prompt in one step gets the same weightings on any worker, the next
step draws anew, and a validation pass (data.val_files, written with split="test") changes no
training draw. The prompt's uid is not passed; the row index stands for the group.
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
         split: str = "train", init: str | None = None) -> list[dict]:
    """Dataset rows in veRL's schema, one per instance of `split` ("train" for data.train_files,
    "test" for data.val_files), its m-answer prompt as chat messages. `init`: the checkpoint veRL
    trains (actor_rollout_ref.model.path), whose recorded system text the rows carry (None: none)."""
    check(algo, options or {}, who="veRL's compute_score")
    prompt = chat_format(init)
    task = tasks.get(task_name)
    m = m if algo in ("vpo", "multi_rlvr") else 1
    info = {"task": task_name, "split": split, "count": count, "seed": seed, "algo": algo, "m": m,
            "options": json.dumps(options or {})}
    return [{"data_source": f"evo/{task_name}", "prompt": prompt.messages(task.prompt(instance, m)),
             "reward_model": {"style": "rule", "ground_truth": ""}, "extra_info": {**info, "index": i}}
            for i, instance in enumerate(_instances(task_name, split, count, seed))]


def write(path: str | Path, task_name: str, algo: str, *, count: int, m: int = 3, seed: int = 0,
          options: dict | None = None, split: str = "train", init: str | None = None) -> Path:
    """`rows()` as the parquet file veRL's `data.train_files` reads (needs pyarrow)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = rows(task_name, algo, count=count, m=m, seed=seed, options=options, split=split, init=init)
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
INFO_TYPES: dict[str, type | tuple[type, ...]] = {"task": str, "split": str, "count": _INT, "seed": _INT, "algo": str, "m": _INT,
                                                    "options": str, "index": _INT}  # `rows`' extra_info


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
    return info


def rollout_step(extra_info: dict) -> int:
    """The weights' version veRL's rollout server tagged the rollout with (`global_steps`)."""
    step = extra_info.get("global_steps")
    if not isinstance(step, _INT) or isinstance(step, bool) or step < 0:
        raise ValueError(f"compute_score keys a group's weightings by extra_info['global_steps'] (the weights' version "
                         f"veRL's rollout server passes through its reward loop), got {step!r}: run veRL's main_ppo "
                         "(0.9.1) with its reward loop and no reward model, or train with --engine trl")
    return int(step)


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **_) -> float:
    """veRL custom reward: the rollout's set score under its group's weightings for this step."""
    info = row_info(extra_info)
    task = tasks.get(info["task"])
    instance = _instances(info["task"], info["split"], info["count"], info["seed"])[info["index"]]
    matrix, _parsed = score_completion(task, instance, solution_str, True, info["m"])
    w = group_weightings(info["algo"], len(task.objectives), info["seed"], rollout_step(info), info["index"], json.loads(info["options"]))
    return set_score(info["algo"], matrix, np.asarray(task.weights, dtype=np.float64), w)
