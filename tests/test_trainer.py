"""The trainer on a real tiny model and a real (toy) task: scoring rules, resume equivalence."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from evo.errors import UserError, WorkFailed
from training.tiny import char_tokenizer
from tests.toytask import CharMix
from training import checkpoint, models
from training.config import TrainConfig
from tasks.completions import score_completion
from training.rollouts import check_template
from training.trainer import MEASURED, run

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def init_dir(tmp_path_factory):
    tok = char_tokenizer()
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    warm_up(model, tok)
    path = tmp_path_factory.mktemp("init")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def warm_up(model, tok, steps: int = 60) -> None:
    """A short supervised warm-up on the toy task's demonstrations (m = 1 and 3)."""
    task, rng = CharMix(), np.random.default_rng(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        texts = [task.prompt(i, m) + task.demonstrations(i, m, rng) + tok.eos_token
                 for i in task.instances("train", 8, seed=int(rng.integers(1000))) for m in (1, 3)]
        batch = tok(texts, return_tensors="pt", padding=True)
        labels = batch.input_ids.masked_fill(batch.attention_mask == 0, -100)
        loss = model(**batch, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


def config(init_dir, out, **overrides) -> TrainConfig:
    base = dict(task="charmix", algo="grpo", init=str(init_dir), out=str(out), steps=4, prompts=3, group=4,
                max_new_tokens=12, lr=1e-3, save_every=2, seed=3)
    return TrainConfig(**{**base, **overrides})


def strip_time(records):
    return [{k: v for k, v in r.items() if k not in MEASURED} for r in records]


def test_scoring_rules():
    task, inst = CharMix(), CharMix().instances("train", 1)[0]
    matrix, ok = score_completion(task, inst, "ab|ab|12", finished=True, m=3)
    assert ok and np.allclose(matrix, [[1, 0], [0, 1], [0, 0]])  # duplicate removed, zero-padded
    assert not score_completion(task, inst, "ab|12", finished=True, m=3)[1]  # wrong number of answers
    assert not score_completion(task, inst, "ab\n|1|2", finished=True, m=3)[0].any()  # unparseable
    assert not score_completion(task, inst, "ab|12|a1", finished=False, m=3)[0].any()  # truncated


def test_template_mismatch_raises():
    task, inst = CharMix(), CharMix().instances("train", 1)[0]
    with pytest.raises(UserError, match="sets of answers"):
        check_template(task, inst, "vpo", 1)
    with pytest.raises(UserError, match="single-answer"):
        check_template(task, inst, "grpo", 3)

    class NoMulti(CharMix):
        def prompt(self, instance, m=1):
            return "mix:"

    with pytest.raises(UserError, match="no multi-answer template"):
        check_template(NoMulti(), inst, "multi_rlvr", 3)


@pytest.mark.parametrize("algo", ["grpo", "vpo"])
def test_resume_reaches_the_same_metrics_as_an_uninterrupted_run(init_dir, tmp_path, algo):
    full = run(config(init_dir, tmp_path / "full", algo=algo), task=CharMix(), progress=False)
    run(config(init_dir, tmp_path / "part", algo=algo, steps=2), task=CharMix(), progress=False)
    rest = run(config(init_dir, tmp_path / "part", algo=algo), resume=True, task=CharMix(), progress=False)
    assert [r["step"] for r in rest] == [3, 4]
    logged = checkpoint.read_metrics(tmp_path / "part")
    assert strip_time(logged) == strip_time(full)
    assert any(r["advantage_abs"] > 0 for r in full) and any(r["grad_norm"] > 0 for r in full)
    a = torch.load(tmp_path / "full" / "trainer_state.pt", weights_only=False)
    b = torch.load(tmp_path / "part" / "trainer_state.pt", weights_only=False)
    assert a["step"] == b["step"] == 4
    assert json.loads((tmp_path / "part" / "train_config.json").read_text())["algo"] == algo


def test_kl_epochs_and_accumulation_run_and_log(init_dir, tmp_path):
    records = run(config(init_dir, tmp_path / "o", steps=2, kl_coef=0.1, ppo_epochs=2, micro_batches=3, algo="maxk"),
                  task=CharMix(), progress=False)
    assert records[1]["kl"] > 0  # the policy moved away from the frozen reference
    assert {"reward/letters", "reward/digits", "scalar", "diversity", "clip_fraction", *MEASURED} <= set(records[0])
    assert "entropy" not in records[0]  # computed only for --entropy-coef (a softmax over the vocabulary)
    assert all(r["rollout_seconds"] + r["update_seconds"] + r["sync_seconds"] <= r["seconds"] + 1e-6 for r in records)
    assert all(r["peak_memory_gib"] > 0 for r in records)
    assert (tmp_path / "o" / "model.safetensors").exists() and (tmp_path / "o" / "tokenizer.json").exists()


def test_grpo_learns_the_scalar_it_is_given(init_dir, tmp_path):
    class Digits(CharMix):
        weights = np.array([0.0, 1.0])  # only digits count

    records = run(config(init_dir, tmp_path / "o", steps=30, prompts=4, group=8, lr=3e-3, save_every=100),
                  task=Digits(), progress=False)
    first = np.mean([r["scalar"] for r in records[:3]])
    last = np.mean([r["scalar"] for r in records[-3:]])
    assert first < 0.5 and last > first + 0.3


def test_snapshots_keep_the_weights_of_every_nth_step(init_dir, tmp_path):
    run(config(init_dir, tmp_path / "o", steps=4, snapshot_every=2), task=CharMix(), progress=False)
    kept = sorted(p.name for p in (tmp_path / "o" / checkpoint.SNAPSHOTS).iterdir())
    assert kept == ["000002", "000004"]
    last, _ = models.load(tmp_path / "o" / "steps" / "000004")
    final, _ = models.load(tmp_path / "o")
    assert all(torch.equal(a, b) for a, b in zip(last.state_dict().values(), final.state_dict().values()))
    assert not (tmp_path / "o" / "steps" / "000004" / checkpoint.STATE_FILE).exists()
    shipped = checkpoint.ship(tmp_path / "o", tmp_path / "shipped")  # what experiments/maze/ship.py does
    assert {"train_config.json", "metrics.jsonl", "config.json"} <= {p.name for p in shipped.iterdir()}
    assert not (shipped / checkpoint.STATE_FILE).exists()
    assert json.loads((shipped / "config.json").read_text())["dtype"] == "float32"
    half, _ = models.load(shipped)
    assert all(torch.equal(a.half().float(), b) for a, b in zip(final.state_dict().values(), half.state_dict().values()))
    early = checkpoint.ship(tmp_path / "o", tmp_path / "shipped-2", step=2)  # ship.py --step 2: a snapshot
    assert [json.loads(r)["step"] for r in (early / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    snap, _ = models.load(tmp_path / "o" / "steps" / "000002")
    assert all(torch.equal(a.half().float(), b) for a, b in zip(snap.state_dict().values(), models.load(early)[0].state_dict().values()))
    with pytest.raises(UserError, match="no checkpoint at"):
        checkpoint.ship(tmp_path / "o", tmp_path / "shipped-3", step=3)


def test_export_stores_half_weights_but_says_float32(init_dir, tmp_path):
    model, tok = models.load(init_dir)
    checkpoint.export(model, tok, tmp_path / "ship", half=True)
    assert json.loads((tmp_path / "ship" / "config.json").read_text())["dtype"] == "float32"
    assert next(model.parameters()).dtype == torch.float32  # the caller's model is untouched
    shipped, _ = models.load(tmp_path / "ship")
    for a, b in zip(model.state_dict().values(), shipped.state_dict().values()):
        assert torch.equal(a.half().float(), b)


def test_a_run_whose_completions_are_cut_off_stops_in_one_line(init_dir, tmp_path):
    """Every completion truncated by a 1-token budget: the run stops after --idle-steps steps
    with a line naming the budget, instead of training on zero rewards to the end (the one stop
    rule, search_signal.idle_cause, that spec training and online training obey too)."""
    with pytest.raises(WorkFailed, match=r"nothing to learn in the last 2 training steps .*cut off by the token budget"):
        run(config(init_dir, tmp_path / "cut", max_new_tokens=1, idle_steps=2), task=CharMix(), progress=False)
    assert [r["step"] for r in checkpoint.read_metrics(tmp_path / "cut")] == [1, 2]
    records = run(config(init_dir, tmp_path / "on", max_new_tokens=1, idle_steps=0), task=CharMix(), progress=False)
    assert len(records) == 4 and records[0]["truncated"] >= 0.9  # 0: trains on, whatever it sees


def test_the_token_budget_is_sized_from_the_tasks_demonstrations(init_dir, tmp_path):
    """max_new_tokens 0: 1.5x the longest m-answer demonstration (+ eos), rounded up to 8; saved
    resolved. A demonstration counts as the model writes it: the character tokenizer's <bos>
    and a chat template's wrapper are not part of it."""
    from tests.test_prompt_format import chat_tokenizer
    from training.trainer import token_budget

    task, tokenizer = CharMix(), models.load(str(init_dir))[1]
    longest = max(len(text) for text in [task.demonstrations(i, 3, np.random.default_rng(3))
                                         for i in task.instances("train", 16, seed=3)])  # one character, one token
    assert token_budget(task, tokenizer, 3, seed=3) == -(-(1.5 * longest + 1) // 8) * 8 >= 1.5 * longest + 1
    assert token_budget(task, chat_tokenizer(), 3, seed=3) == token_budget(task, tokenizer, 3, seed=3)
    run(config(init_dir, tmp_path / "auto", algo="vpo", max_new_tokens=0, steps=1), task=CharMix(), progress=False)
    saved = json.loads((tmp_path / "auto" / "train_config.json").read_text())
    assert saved["max_new_tokens"] == token_budget(task, tokenizer, 3, seed=3)

