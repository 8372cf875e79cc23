"""fp32 master weights: a bf16 checkpoint fine-tuned at lr 1e-6 moves every weight tensor.

The plan of a CUDA run (`precision.plan("cuda", ...)`) is built here and trained with on the
CPU (CPU autocast has bfloat16), so the code path is the one a GPU run takes."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from tests.test_models import make_init
from tests.toytask import CharMix
from training import precision
from training.config import TrainConfig
from training.trainer import rollout, setup, update

torch.set_num_threads(1)

F32, BF16 = torch.float32, torch.bfloat16


@pytest.fixture(scope="module")
def bf16_init(tmp_path_factory):
    """A tiny random Qwen2 (untied head) stored in bfloat16, as real checkpoints are."""
    path = make_init(tmp_path_factory.mktemp("bf16") / "init", "qwen2")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=F32)
    model.config.tie_word_embeddings = False
    untied = AutoModelForCausalLM.from_config(model.config)
    untied.load_state_dict(model.state_dict(), strict=False)
    untied.lm_head.weight.data.copy_(model.get_input_embeddings().weight)
    untied.to(BF16).save_pretrained(path)
    assert json.loads((path / "config.json").read_text())["dtype"] == "bfloat16"
    return path


def test_the_plan_as_a_table():
    assert precision.plan("cuda", BF16, lora=False) == precision.Precision(F32, BF16, True, None)
    assert precision.plan("cuda", BF16, lora=True) == precision.Precision(BF16, BF16, False, None)  # LoRA unchanged
    assert precision.plan("cuda", F32, lora=False) == precision.Precision(F32, F32, False, None)
    assert precision.plan("cpu", BF16, lora=False) == precision.Precision(F32, F32, False, None)
    assert precision.plan("cpu", BF16, lora=False, bf16=True).autocast
    assert precision.plan("cuda", BF16, lora=False, bf16=False) == precision.Precision(F32, BF16, False, None)
    pure = precision.plan("cuda", BF16, lora=False, setting="bfloat16")
    assert pure.weights == BF16 and not pure.autocast and "--weight-dtype bfloat16" in pure.warning
    with pytest.raises(ValueError, match="weight_dtype"):
        precision.plan("cuda", BF16, lora=False, setting="half")


def changed_after_one_step(init, out, setting: str) -> dict[str, float]:
    """Each weight tensor's fraction of elements changed by one update at lr 1e-6 under the
    plan of a CUDA run (with `setting`), trained on the CPU."""
    plan = precision.plan("cuda", precision.checkpoint_dtype(init), lora=False, setting=setting)
    config = TrainConfig(task="charmix", algo="grpo", init=str(init), out=str(out), steps=1, prompts=4, group=6,
                         max_new_tokens=8, lr=1e-6, seed=0, device="cpu")
    state = setup(config, False, CharMix(), plan=plan)
    assert state.config.bf16 == plan.autocast and state.config.weight_dtype == setting.replace("auto", "float32")
    assert {p.dtype for p in state.model.parameters()} == {plan.weights}
    before = {name: p.detach().clone() for name, p in state.model.named_parameters()}
    rolls, adv = rollout(state)
    assert abs(adv).sum() > 0  # something to learn
    update(state, rolls, adv)
    return {name: float((p.detach() != before[name]).float().mean()) for name, p in state.model.named_parameters()}


def test_fp32_masters_move_every_weight_tensor_at_lr_1e_6(bf16_init, tmp_path):
    changed = changed_after_one_step(bf16_init, tmp_path / "fp32", "auto")
    assert len(changed) == 27 and not [name for name, fraction in changed.items() if fraction == 0]
    norms = [f for name, f in changed.items() if "norm" in name]
    assert len(norms) == 5 and min(norms) == 1.0  # every element of every norm gain


def test_pure_bf16_when_asked_loses_the_update(bf16_init, tmp_path, capsys):
    changed = changed_after_one_step(bf16_init, tmp_path / "bf16", "bfloat16")
    assert "warning: --weight-dtype bfloat16" in capsys.readouterr().err
    assert max(f for name, f in changed.items() if "norm" in name) == 0  # what fp32 masters fix
    projections = [f for name, f in changed.items() if name.endswith("proj.weight")]
    assert sum(projections) / len(projections) < 0.1  # measured 1.8% of their elements


def test_trl_trains_float32_weights_under_bf16_autocast(bf16_init, tmp_path):
    """`--engine trl` on a CUDA plan: TRL's default (float32 weights, bf16 autocast), not a bf16 model."""
    pytest.importorskip("trl")
    from training.integrations import trl

    plan = precision.plan("cuda", precision.checkpoint_dtype(bf16_init), lora=False)
    config = TrainConfig(task="charmix", algo="grpo", init=str(bf16_init), out=str(tmp_path), steps=1, prompts=4,
                         group=6, max_new_tokens=8, lr=1e-6, seed=0, device="cpu")
    grpo = trl.trainer(config, CharMix(), plan=plan)
    assert grpo.args.bf16 and {p.dtype for p in grpo.model.parameters()} == {F32}
    before = {name: p.detach().clone() for name, p in grpo.model.named_parameters()}
    grpo.train()
    still = [name for name, p in grpo.model.named_parameters() if torch.equal(p.detach(), before[name])]
    assert not still, still


def tensors_of(path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(path / "model.safetensors")


def test_a_bf16_run_exports_bf16_at_the_inputs_size_and_chains(bf16_init, tmp_path):
    """bf16 in, bf16 out: the run's Hugging Face files hold the float32 masters rounded to bf16,
    config.json says bfloat16, the file is the input's size; the masters a resume needs are kept
    beside them (a resumed run ends on the uninterrupted one's weights); `--init` of the output
    plans exactly as from the original."""
    from safetensors.torch import load_file

    from training import checkpoint, planner
    from training.trainer import run

    base = dict(task="charmix", algo="grpo", init=str(bf16_init), prompts=4, group=6, max_new_tokens=8, lr=1e-6,
                seed=0, device="cpu", idle_steps=0, entropy_coef=0.05)
    whole = tmp_path / "whole"
    run(TrainConfig(**base, out=str(whole), steps=2), task=CharMix(), progress=False)
    exported, given = tensors_of(whole), tensors_of(bf16_init)
    assert {t.dtype for t in exported.values()} == {BF16} and set(exported) == set(given)
    assert json.loads((whole / "config.json").read_text())["dtype"] == "bfloat16"
    size, original = (whole / "model.safetensors").stat().st_size, (bf16_init / "model.safetensors").stat().st_size
    assert abs(size - original) < 1024, (size, original)  # the input's size (the header may differ by a few bytes)
    masters = load_file(whole / checkpoint.MASTERS_FILE)
    assert {t.dtype for t in masters.values()} == {F32}
    assert all(torch.equal(exported[name], masters[name].to(BF16)) for name in exported)
    assert any(not torch.equal(exported[name], given[name]) for name in given)  # trained, and the bf16 export shows it

    resumed = tmp_path / "resumed"
    run(TrainConfig(**base, out=str(resumed), steps=1), task=CharMix(), progress=False)
    run(TrainConfig(**base, out=str(resumed), steps=2), resume=True, task=CharMix(), progress=False)
    again = load_file(resumed / checkpoint.MASTERS_FILE)
    assert all(torch.equal(masters[name], again[name]) for name in masters)  # resumed from the exact masters

    cuda = {"init": dict(base, out=str(tmp_path / "a")), "chained": dict(base, init=str(whole), out=str(tmp_path / "b"))}
    plans = {}
    for name, settings in cuda.items():
        config = TrainConfig(**{**settings, "lr": 0.0})
        plan = precision.plan("cuda", precision.checkpoint_dtype(settings["init"]), lora=False)
        state = setup(config, False, CharMix(), plan=plan)
        plans[name] = (plan, state.config.lr, state.config.bf16, state.config.weight_dtype,
                       planner.resident_bytes(state.model, state.reference), {p.dtype for p in state.model.parameters()})
    assert plans["init"] == plans["chained"] and plans["init"][0].autocast


def test_lora_keeps_no_second_copy_for_the_reference_and_exports_in_the_inits_dtype(bf16_init, tmp_path):
    """LoRA with a KL term: the reference is the model with its adapters off (KL 0 at step 1, as
    from the init), and the export writes the merged weights in the init's dtype."""
    pytest.importorskip("peft")
    from training.trainer import run

    config = TrainConfig(task="charmix", algo="grpo", init=str(bf16_init), out=str(tmp_path / "lora"), steps=2,
                         prompts=4, group=6, max_new_tokens=8, lr=1e-2, seed=0, device="cpu", idle_steps=0,
                         lora_rank=4, kl_coef=0.1, entropy_coef=0.05)
    state = setup(config, False, CharMix())
    assert state.reference is state.model
    records = run(config, task=CharMix(), progress=False)
    assert records[0]["kl"] == pytest.approx(0.0, abs=1e-7) and records[1]["kl"] > 0
    exported = tensors_of(tmp_path / "lora")
    assert {t.dtype for t in exported.values()} == {BF16}
    assert not (tmp_path / "lora" / "masters.safetensors").exists()
