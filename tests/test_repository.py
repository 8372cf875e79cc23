"""The repository stays a library: no tracked file over 2 MB outside the shipped checkpoints,
and the whole tracked tree under 60 MB (issue 37). Experiment artifacts that no table needs
(optimizer states, snapshots, duplicated weights) belong in a run directory, not in git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LARGEST_FILE = 2 * 1024 * 1024
SHIPPED = "evo/checkpoints/"
TREE_LIMIT = 60 * 1000 * 1000


def _tracked() -> list[Path]:
    try:
        listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [Path(name) for name in listing.decode().split("\0") if name]


def _size(path: Path) -> int:
    return (ROOT / path).stat().st_size if (ROOT / path).is_file() else 0  # a file deleted but not yet committed


def oversized(paths: list[Path], size=_size) -> list[str]:
    """Tracked files over the limit, outside the shipped checkpoints."""
    return [f"{p} ({size(p) / 2**20:.1f} MiB)" for p in paths
            if not p.as_posix().startswith(SHIPPED) and size(p) > LARGEST_FILE]


def test_no_tracked_file_over_2_mib_outside_the_shipped_checkpoints():
    big = oversized(_tracked())
    assert not big, "tracked files over 2 MiB (keep run artifacts out of git, weights in float16): " + ", ".join(big)


def test_the_tracked_tree_stays_under_60_mb():
    total = sum(map(_size, _tracked()))
    assert total <= TREE_LIMIT, f"the tracked tree is {total / 1e6:.1f} MB (limit 60 MB)"


def test_the_size_rule_catches_a_big_file_and_spares_the_shipped_checkpoints():
    sizes = {"examples/run/trainer_state.pt": 7_000_000, "evo/checkpoints/x/model.safetensors": 9_000_000,
             "docs/a.md": 10_000}
    found = oversized([Path(p) for p in sizes], size=lambda p: sizes[p.as_posix()])
    assert found == ["examples/run/trainer_state.pt (6.7 MiB)"]


def test_an_archived_runs_compressed_metrics_read_like_the_plain_file(tmp_path):
    import gzip
    import json

    from training.checkpoint import read_metrics

    records = [{"step": 1, "scalar": 0.25}, {"step": 2, "scalar": 0.5}]
    (tmp_path / "metrics.jsonl.gz").write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode()))
    assert read_metrics(tmp_path) == records
    (tmp_path / "metrics.jsonl.gz").write_bytes(b"\x1f\x8b not gzip")
    from evo.errors import UserError
    with pytest.raises(UserError, match="unreadable"):
        read_metrics(tmp_path)
