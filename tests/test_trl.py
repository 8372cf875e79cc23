"""`--engine trl`: the set-score reward inside TRL's real GRPOTrainer on the tiny maze model.

TRL's advantage is (R - mean) / (sample std + 1e-4); the project's estimators compute
(R - mean) / (population std + 1e-6) (0 when the std is ~0). Both are checked against the
same set scores R, and R against what `training.advantages.compute` draws for the group.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import tasks
from evo.policies import CHECKPOINTS, load
from tasks.completions import score_completion
from tests.test_vllm import needs_vllm, served_greedy
from training import advantages
from training.config import TrainConfig
from training.integrations.set_reward import ALGOS, group_weightings, set_score

pytest.importorskip("trl")
torch.set_num_threads(1)

WARMUP = str(CHECKPOINTS / "maze-warmup")
OPTIONS = {"vpo": {"K": 20}, "random_weight_grpo": {"alpha": 0.5}, "grpo": {}, "multi_rlvr": {}}


@pytest.mark.parametrize("algo", ALGOS)
def test_group_zscore_of_the_set_scores_is_the_estimator(algo):
    rng, seed, step = np.random.default_rng(0), 7, 3
    m = 3 if advantages.entry(algo).multi_answer else 1
    rewards = rng.random((5, 6, m, 2)) * (rng.random((5, 6, m, 1)) < 0.6)
    weights = np.array([1.0, 2.0])
    for key in range(5):
        w = group_weightings(algo, 2, seed, step, key, OPTIONS[algo])
        scores = np.array([set_score(algo, r, weights, w) for r in rewards[key]])
        ours = advantages.compute(algo, rewards[key:key + 1], weights=weights, rng=np.random.default_rng([seed, step, key]),
                                  **OPTIONS[algo])[0]
        assert np.allclose(advantages.zscore(scores), ours, atol=1e-12)


@pytest.mark.slow
def test_trl_advantages_equal_compute_vpo_up_to_trls_std_conventions(tmp_path):
    from training.integrations.trl import trainer

    task, group = tasks.get("maze"), 4
    config = TrainConfig(task="maze", algo="vpo", init=WARMUP, out=str(tmp_path), steps=2, prompts=2, group=group,
                         max_new_tokens=160, seed=5, options={"K": 20})
    grpo = trainer(config, task)
    rows = [grpo.train_dataset[i] for i in range(2) for _ in range(group)]
    out = grpo._generate_and_score_completions(rows)  # TRL's own sampling, rewards and advantages
    trl_adv = out["advantages"].numpy().reshape(2, group)
    eos = grpo.processing_class.eos_token_id
    ids = [c[m.bool()].tolist() for c, m in zip(out["completion_ids"], out["completion_mask"])]
    texts = grpo.processing_class.batch_decode([torch.tensor(x) for x in ids], skip_special_tokens=True)
    instances = task.instances("train", config.prompts * config.steps, seed=config.seed)
    rewards = np.stack([score_completion(task, instances[row["instance"]], text, i[-1] == eos, 3)[0]
                        for row, text, i in zip(rows, texts, ids)]).reshape(2, group, 3, len(task.objectives))
    weights = np.asarray(task.weights, dtype=np.float64)
    spread = []
    for key in range(2):
        w = group_weightings("vpo", rewards.shape[3], config.seed, 0, key, config.options)
        raw = advantages.vpo_scores(rewards[key:key + 1], w[None])[0]
        spread.append(raw.std())
        assert np.allclose(trl_adv[key], (raw - raw.mean()) / (raw.std(ddof=1) + 1e-4), atol=1e-5)  # TRL's convention
        ours = advantages.compute("vpo", rewards[key:key + 1], weights=weights, rng=np.random.default_rng([config.seed, 0, key]), K=20)[0]
        assert np.allclose(ours, (raw - raw.mean()) / (raw.std() + 1e-6), atol=1e-9)  # the project's, same weightings
        factor = (raw.std() + 1e-6) / (raw.std(ddof=1) + 1e-4)
        assert np.allclose(trl_adv[key], ours * factor, atol=1e-5)
    assert max(spread) > 1e-3  # at least one group's rollouts score differently


@pytest.fixture(scope="module")
def trl_run(tmp_path_factory) -> tuple[Path, list[dict]]:
    from training.integrations.trl import run

    out = tmp_path_factory.mktemp("trl-run")
    config = TrainConfig(task="maze", algo="vpo", init=WARMUP, out=str(out), steps=3, prompts=2, group=4,
                         max_new_tokens=120, lr=1e-3, seed=1, options={"K": 20})
    return out, run(config, progress=False)


@pytest.mark.slow
def test_a_short_trl_run_writes_a_checkpoint_local_loads(trl_run):
    out, records = trl_run
    assert [r["step"] for r in records] == [1, 2, 3]
    assert {"scalar", "reward/gold", "reward/diamond", "rewards/vpo/mean", "loss"} <= set(records[0])
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]
    assert json.loads((out / "train_config.json").read_text())["algo"] == "vpo"
    policy, init = load(f"local:{out}"), load(f"local:{WARMUP}")
    trained = dict(policy.sampler.model.named_parameters())
    moved = [not torch.equal(p, trained[n]) for n, p in init.sampler.model.named_parameters()]
    assert any(moved)
    prompt = tasks.get("maze").prompt(tasks.get("maze").instances("test", 1)[0], 3)
    assert policy.generate([prompt], n=2, max_new_tokens=40, seed=0)[0][0].token_ids


@needs_vllm
def test_the_trl_checkpoint_serves_with_vllm_serve_and_greedy_matches_local(trl_run):
    out, _ = trl_run
    task = tasks.get("maze")
    served, local = served_greedy(out, task.prompt(task.instances("test", 1)[0], 3), out / "serve.log")
    assert served == local and served


def test_flags_trl_cannot_honour_are_refused_in_one_line(tmp_path):
    from evo.errors import UserError
    from training.integrations.trl import refuse_unsupported

    base = TrainConfig(task="maze", algo="vpo", init=WARMUP, out=str(tmp_path), prompts=2, group=2, max_new_tokens=64)
    cases = [({"diversity_coef": 0.1}, "--diversity-coef is the project's"),
             ({"sync_every": 2}, "--sync-every is for --engine ours"),
             ({"rollouts": "vllm", "tis_cap": 2.0}, "--tis-cap is for --engine ours"),
             ({"rollouts": "vllm", "vllm_sleep": True}, "--vllm-sleep is for --engine ours"),
             ({"loss_norm": 7}, "drop --loss-norm"),
             ({"group": 1}, "--group >= 2"),
             ({"vllm_options": {"mode": "server"}}, "--vllm-option with --engine trl needs --use-vllm")]
    for change, message in cases:
        with pytest.raises(UserError, match=re.escape(message)):
            refuse_unsupported(dataclasses.replace(base, **change), use_vllm=False)
    for change, message in (({"options": {"k": 4}}, "bad --option for vpo: k (it takes: K, alpha, sobol)"),
                            ({"algo": "grpo", "options": {"K": 4}}, "bad --option for grpo: K (it takes: none)")):
        with pytest.raises(ValueError, match=re.escape(message)):  # refused with the config itself, for every engine
            dataclasses.replace(base, **change)
    refuse_unsupported(dataclasses.replace(base, entropy_coef=0.1, loss_norm=64, snapshot_every=1, save_every=3), use_vllm=False)


def test_grpo_config_takes_the_global_batch_and_the_vllm_modes(tmp_path):
    from evo.errors import UserError
    from training.integrations.trl import grpo_config, vllm_fields

    config = TrainConfig(task="maze", algo="vpo", init=WARMUP, out=str(tmp_path), prompts=4, group=4, micro_batches=2,
                         entropy_coef=0.01, device="cpu",
                         vllm_options={"mode": "server", "server_base_url": "http://h:8000", "enable_sleep_mode": True})
    args = grpo_config(config, use_vllm=True, progress=False, processes=2)
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (4, 2)  # 16 rollouts = 4 x 2 x 2 ranks
    assert (args.vllm_mode, args.vllm_server_base_url, args.vllm_enable_sleep_mode) == ("server", "http://h:8000", True)
    assert args.entropy_coef == 0.01 and {"mode", "enable_sleep_mode", "gpu_memory_utilization"} <= set(vllm_fields())
    assert args.save_strategy == "no"
    saving = grpo_config(dataclasses.replace(config, save_every=3), use_vllm=False, progress=False, save=True)
    assert (saving.save_strategy, saving.save_steps, saving.save_total_limit) == ("steps", 3, 1)
    with pytest.raises(UserError, match=r"over --micro-batches x processes \(2 x 3\)"):
        grpo_config(config, use_vllm=False, progress=False, processes=3)


@pytest.mark.slow
def test_save_every_keeps_a_trl_checkpoint_that_resume_continues(tmp_path):
    from training.integrations.trl import last_checkpoint, run

    config = TrainConfig(task="maze", algo="grpo", init=WARMUP, out=str(tmp_path), steps=2, prompts=2, group=2,
                         max_new_tokens=8, lr=1e-3, entropy_coef=0.05, save_every=2, seed=3, device="cpu")
    first = run(config, progress=False, given={"save_every"})
    assert [r["step"] for r in first] == [1, 2] and last_checkpoint(tmp_path).endswith("checkpoint-2")
    again = run(dataclasses.replace(config, steps=3), progress=False, given=set(), resume=True)
    assert [r["step"] for r in again] == [3]
    assert [json.loads(x)["step"] for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]
