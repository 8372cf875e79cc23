"""experiments/maze/table.py: seeds grouped per algorithm, and each seed's run against the
baseline's run of the same seed, on a hand-computed case."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

TABLE = Path(__file__).resolve().parents[1] / "experiments" / "maze" / "table.py"


@pytest.fixture(scope="module")
def table():
    spec = importlib.util.spec_from_file_location("maze_table", TABLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def model(best_at_30: list[float], mode: str = "single") -> dict:
    columns = {c: [0.5] * len(best_at_30) for c in ("best_at_1", "best_at_5", "best_at_10", "diversity", "pareto_fraction", "valid")}
    return {"mode": mode, "per_maze": {**columns, "best_at_30": best_at_30}}


def test_seeds_are_grouped_and_compared_seed_by_seed(table):
    models = {
        "vpo-s1": model([0.6, 0.9, 0.8, 0.7], "set"),  # mean 0.75
        "grpo-s0": model([0.5, 0.7, 0.6, 0.6]),        # mean 0.60
        "vpo-s0": model([0.6, 0.8, 0.7, 0.7], "set"),  # mean 0.70
        "grpo-s1": model([0.6, 0.6, 0.6, 0.6]),        # mean 0.60
        "warmup-set": model([0.6, 0.6, 0.6, 0.6], "set"),
    }
    groups = table.grouped(models)
    assert list(groups["vpo"]) == [0, 1] and list(groups["warmup-set"]) == [None]
    rows = table.build(models, ["grpo", "warmup-set"])
    vpo = rows["vpo"]
    assert vpo["seeds"] == 2 and vpo["mode"] == "set"
    assert vpo["best_at_30"] == pytest.approx(0.725)
    assert vpo["best_at_30_seed_range"] == pytest.approx([0.70, 0.75])
    versus_grpo = vpo["best_at_30_minus_grpo"]
    assert versus_grpo["mean"] == pytest.approx(0.125)  # per maze: (0.6+0.6)/2-(0.5+0.6)/2, ... averaged
    assert versus_grpo["per_seed"] == pytest.approx([0.10, 0.15])
    assert vpo["best_at_30_minus_warmup-set"]["per_seed"] == []  # the warm-up has no seeds to pair
    text = table.markdown(rows, ["grpo", "warmup-set"], mazes=4)
    assert "- vpo best_at_30: +0.125 [" in text and "per seed +0.100, +0.150" in text
    assert "| vpo (set) | 2 | " in text


def test_the_valid_diversity_and_oracle_columns_lead_when_every_model_has_them(table):
    extra = {"best_at_30_over_oracle": [0.9] * 4, "diversity_valid": [0.3] * 4}
    models = {"grpo-s0": model([0.5] * 4), "vpo-s0": model([0.6] * 4, "set")}
    assert "diversity_valid" not in table.columns_of(models)  # older evaluations: the columns they have
    for result in models.values():
        result["per_maze"].update(extra)
    columns = table.columns_of(models)
    assert columns.index("best_at_30") < columns.index("best_at_30_over_oracle") < columns.index("diversity_valid") < columns.index("diversity")
    text = table.markdown(table.build(models, ["grpo"]), ["grpo"], mazes=4)
    assert "| best@30 / oracle | diversity (valid) | diversity (all rows) |" in text
    assert "- vpo diversity_valid: +0.000" in text


def test_a_glob_over_the_tables_directory_skips_its_own_output_and_refuses_other_json(tmp_path):
    import json
    import subprocess
    import sys

    for name, best in (("grpo-s0", [0.5] * 4), ("vpo-s0", [0.6] * 4)):
        (tmp_path / f"{name}.json").write_text(json.dumps({"settings": {"mazes": 4}, "models": {name: model(best)}}))
    out = str(tmp_path / "table")

    def run(*paths):
        return subprocess.run([sys.executable, str(TABLE), *map(str, paths), "--out", out], capture_output=True, text=True,
                              cwd=TABLE.parents[2], env={"PYTHONPATH": str(TABLE.parents[2]), "PATH": ""}, timeout=120)

    first = run(*sorted(tmp_path.glob("*.json")))
    assert first.returncode == 0, first.stderr
    again = run(*sorted(tmp_path.glob("*.json")))  # now table.json is among them
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout and "- vpo best_at_30: +0.100 [" in again.stdout
    (tmp_path / "notes.json").write_text("{}")
    other = run(*sorted(tmp_path.glob("*.json")))
    assert other.returncode == 2 and "notes.json is not an evaluation file" in other.stderr
