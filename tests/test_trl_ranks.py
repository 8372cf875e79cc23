"""`--engine trl` under two processes (torchrun, gloo on CPU): `--prompts` is the global batch,
the export gathers the weights every rank trained, and the step metrics count all ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trl_ranks import GROUP, PROMPTS, STEPS

pytest.importorskip("trl")
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_two_ranks_split_the_global_batch_and_export_the_trained_weights(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           str(ROOT / "tests" / "trl_ranks.py"), str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert all(r["world"] == 2 and r["backend"] == "gloo" for r in ranks)
    assert all(r["per_device_batch"] == PROMPTS * GROUP // 2 for r in ranks)  # each rank half of the global batch
    for r in ranks:  # every rank's trained weights are what rank 0 exported, and training moved them
        assert r["equal"] == r["keys"] and r["moved"] and r["snapshot_equal"]  # --snapshot-every: the last step's too
    records, other = ranks[0]["records"], ranks[1]["records"]
    assert other == [] and [x["step"] for x in records] == list(range(1, STEPS + 1))
    on_disk = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert on_disk == records
    for x in records:
        assert x["prompts"] == PROMPTS and x["rollouts"] == PROMPTS * GROUP  # the global batch, not per rank
        # tokens/s over all ranks: TRL's completions/mean_length is the mean over the gathered batch
        assert x["tokens_per_s"] * x["seconds"] == pytest.approx(x["completions/mean_length"] * PROMPTS * GROUP)
        assert x["rollout_seconds"] > 0 and x["update_seconds"] > 0 and x["sync_seconds"] == 0.0
        assert x["seconds"] >= max(x["rollout_seconds"], x["update_seconds"]) and x["peak_memory_gib"] > 0.1
    assert json.loads((tmp_path / "config.json").read_text())["model_type"]
