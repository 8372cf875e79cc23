"""Import a scorer named "path.py:function" or "package.module:function"."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evo.sandbox.child import Stages


class ScorerError(Exception):
    """The scorer cannot be imported or is not callable (one-line message)."""


def is_file_ref(ref: str) -> bool:
    """Whether a scorer reference names a file ("path.py:function") rather than a module."""
    target = ref.rpartition(":")[0]
    return target.endswith(".py") or "/" in target


def absolute(ref: str) -> str:
    """A "path.py:function" reference with its path made absolute against the caller's working
    directory (the sandbox's workers run elsewhere); a module reference as it is."""
    if not is_file_ref(ref):
        return ref
    target, _, name = ref.rpartition(":")
    path = Path(target).expanduser().resolve()
    if not path.is_file():
        raise ScorerError(f"scorer {ref!r}: no file {path} (a relative path is taken from the working directory {Path.cwd()})")
    return f"{path}:{name}"


def load_scorer(ref: str, search_path: str | None = None) -> Callable[[str], Any]:
    target, _, name = ref.rpartition(":")
    try:
        if is_file_ref(ref):
            path = Path(target)
            sys.path.insert(0, str(path.parent))
            module_name = f"_evo_scorer_{path.stem}"
            spec = importlib.util.spec_from_file_location(module_name, path)
            if spec is None or spec.loader is None:
                raise ScorerError(f"cannot import scorer file {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        else:
            if search_path:
                sys.path.insert(0, search_path)
            module = importlib.import_module(target)
    except ScorerError:
        raise
    except BaseException as error:  # the scorer's import may raise anything, even SystemExit
        raise ScorerError(f"cannot import scorer {ref!r}: {type(error).__name__}: {error}") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise ScorerError(f"scorer {ref!r}: module has no function {name!r}")
    return function


def load_stages(ref: str, cascade: Sequence[Sequence[Any]], weights: Sequence[float] | None,
                search_path: str | None = None) -> Callable[[str], Any] | Stages:
    """The scorer, or with `cascade` ([ref, threshold] per later stage) the cascade of them."""
    first = load_scorer(ref, search_path)
    if not cascade:
        return first
    later = tuple(load_scorer(later_ref, search_path) for later_ref, _ in cascade)
    return Stages((first, *later), tuple(float(t) for _, t in cascade), tuple(weights or ()))
