"""Checkpoint directories: a shipped checkpoint's name or a Hugging Face directory, resolved to a
directory whose weights files are readable and hold plain tensors (every policy that loads
weights, and the trainers' --init, go through `resolve_checkpoint`)."""

from __future__ import annotations

from pathlib import Path

from evo.errors import UserError

CHECKPOINTS = Path(__file__).resolve().parent.parent / "checkpoints"
SPEC_TASK = "spec:"  # a checkpoint's task trained by `evo train --spec`: "spec:" + the spec's absolute path


def shipped_checkpoints() -> list[str]:
    """Names of the checkpoints shipped in evo/checkpoints/ (directories with a config.json)."""
    if not CHECKPOINTS.is_dir():
        return []
    return sorted(p.name for p in CHECKPOINTS.iterdir() if (p / "config.json").is_file())


MODEL_PICKLES = (".bin",)  # what transformers loads of a model directory besides safetensors (pytorch_model*.bin);
# the trainer's own state files beside the weights (trainer_state.pt) are read weights-only by the trainer


def check_weights(directory: Path) -> Path:
    """`directory` when each of its safetensors files has a readable header that covers the
    file (a truncated or garbage file is a one-line UserError, not a loader's traceback) and
    no torch file in it names code (a pickled `pytorch_model.bin` must hold plain tensors)."""
    from safetensors import safe_open

    from evo.torch_files import refuse_code

    for path in sorted(Path(directory).glob("*.safetensors")):
        try:
            with safe_open(str(path), "pt"):
                pass
        except Exception as error:  # SafetensorError (bad header, truncated), OSError
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise UserError(f"{path}: not a readable weights file ({reason[:160]}); "
                            "restore it or point at another checkpoint") from None
    refuse_code(directory, "a model directory holds plain tensors: replace the file with one from a source you trust",
                recursive=False, suffixes=MODEL_PICKLES)
    return Path(directory)


def resolve_checkpoint(name: str) -> Path:
    """An existing directory, else a shipped checkpoint of that name, with readable weights;
    one-line error otherwise."""
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(f"{path} is not a Hugging Face model directory (no config.json)")
        return check_weights(path)
    if name and "/" not in name and (CHECKPOINTS / name / "config.json").is_file():
        return check_weights(CHECKPOINTS / name)
    shipped = ", ".join(shipped_checkpoints()) or "none"
    raise UserError(f"no model directory {name!r} and no shipped checkpoint of that name (shipped: {shipped})")
