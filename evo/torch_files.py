"""Which torch files in a directory received from elsewhere may be loaded without running code.

A torch file is a zip holding a pickle; unpickling calls whatever the pickle names. Torch's
`weights_only` loader calls only an allowlist (tensors, containers, numbers, dtypes); a file
that names nothing else cannot run code whichever loader reads it. DeepSpeed reads its own
checkpoint files with the full unpickler (they hold its config and loss-scaler objects), so
they pass only when the user says they trust them.

    culprit = code_in(Path("out/trl/checkpoint-4"))   # None, or (file, what it names)
"""

from __future__ import annotations

from pathlib import Path

from evo.errors import UserError

# Beside torch's own allowlist: the numpy state in transformers' rng_state.pth (transformers'
# `safe_globals`, with which it loads that file).
NUMPY_STATE = frozenset({"numpy.dtype", "numpy.ndarray", "numpy._core.multiarray._reconstruct",
                         "numpy.core.multiarray._reconstruct", "numpy.dtypes.UInt32DType"})
SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".ckpt", ".distcp")
NEVER_LOADED = frozenset({"training_args.bin"})  # transformers writes it for people; a resume never reads it


def named_code(path: Path) -> list[str]:
    """What the pickle in the torch file at `path` names beyond torch's weights-only allowlist
    and NUMPY_STATE (nothing is unpickled); ["not a torch zip file"] when it cannot be checked."""
    from torch.serialization import get_unsafe_globals_in_checkpoint

    try:
        names = get_unsafe_globals_in_checkpoint(str(path))
    except Exception:  # legacy format, truncated, garbage: nothing a checked load would read
        return ["not a torch zip file"]
    return sorted(set(names) - NUMPY_STATE)


def code_in(directory: Path, recursive: bool = True, suffixes: tuple[str, ...] = SUFFIXES) -> tuple[Path, list[str]] | None:
    """The first torch file (a name ending in one of `suffixes`) in `directory` (and below, when
    `recursive`; by name) that names code, with what it names; a DeepSpeed `latest` tag that
    leads out of the directory counts."""
    directory = Path(directory)
    if not directory.is_dir():  # nothing there to load
        return None
    latest = directory / "latest"
    if latest.is_file():
        tag = latest.read_text(errors="replace").strip()
        if not tag or "/" in tag or "\\" in tag or tag in (".", "..") or not (directory / tag).is_dir():
            return latest, [f"the tag {tag[:60]!r}, not a directory beside it"]
    for path in sorted(directory.rglob("*") if recursive else directory.iterdir()):
        if path.suffix in suffixes and path.name not in NEVER_LOADED and path.is_file():
            names = named_code(path)
            if names:
                return path, names
    return None


def refuse_code(directory: Path, remedy: str, recursive: bool = True, suffixes: tuple[str, ...] = SUFFIXES) -> None:
    """A one-line UserError naming the first file in `directory` that could run code when
    loaded (`code_in`), and `remedy` (how to trust it deliberately, or what to do instead)."""
    found = code_in(directory, recursive, suffixes)
    if found is not None:
        path, names = found
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        raise UserError(f"{path}: names {shown}, which loading it could run as code; {remedy}")
