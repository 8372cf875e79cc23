"""Names that say one thing: no two classes of the project share a name, and every shipped
checkpoint's config.json says float32 over its float16 weights (loaders compute in float32)."""

import ast
import json
import struct
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECKPOINTS = ROOT / "evo" / "checkpoints"


def test_no_two_classes_share_a_name():
    where = defaultdict(list)
    for part in ("evo", "tasks", "training"):
        for path in (ROOT / part).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    where[node.name].append(str(path.relative_to(ROOT)))
    shared = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not shared, shared  # (Problem was in tasks/humaneval and tasks/symreg, Program in evo/sandbox and evo/database)


def _weight_dtypes(path: Path) -> set[str]:
    with open(path, "rb") as file:
        header = json.loads(file.read(struct.unpack("<Q", file.read(8))[0]))
    return {v["dtype"] for k, v in header.items() if k != "__metadata__"}


def test_shipped_checkpoints_say_float32_over_float16_weights():
    shipped = sorted(p for p in CHECKPOINTS.iterdir() if (p / "config.json").is_file())
    assert len(shipped) >= 6
    for directory in shipped:
        assert json.loads((directory / "config.json").read_text())["dtype"] == "float32", directory.name
        assert _weight_dtypes(directory / "model.safetensors") == {"F16"}, directory.name
