"""RUN/online/'s torch state and group files (training/online.py), written atomically and
typed and validated on read (the JSON settings and metrics: evo/training_log.py).

    state.pt                 {"model": weights, "optimizer": AdamW's state, "step": int, "seconds": float},
                             read with weights_only=True: a planted pickle cannot run code
    groups/NNNNNNNN.json     {"asked": int, "prompt": [token id, ...], "completions": [[text, [token id, ...], finish], ...]}

Every failure to read or write them is a one-line UserError that names the file and what to
do; a failed save leaves the previous state in place.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from evo.errors import UserError
from evo.training_log import damaged, move_online, write_atomic

STATE_FILE, GROUPS = "state.pt", "groups"


def _reason(error: BaseException) -> str:
    text = str(error).strip()
    return (text.splitlines()[0] if text else type(error).__name__)[:160]


def save_state(directory: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int, seconds: float) -> None:
    """Replace directory/state.pt (a kill or a failed write leaves the previous one)."""
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": int(step), "seconds": float(seconds)}
    partial = directory / (STATE_FILE + ".tmp")
    try:
        with open(partial, "wb") as handle:  # (a handle of ours: a full disk is an OSError, not torch's "unexpected pos")
            torch.save(state, handle)
        os.replace(partial, directory / STATE_FILE)
    except (OSError, RuntimeError) as error:
        try:
            partial.unlink()
        except OSError:
            pass
        reason = getattr(error, "strerror", None) or _reason(error)
        raise UserError(f"cannot save the training state in {directory} ({reason}); the last saved state is kept: "
                        f"free space or make it writable, then continue with evo run --resume {directory.parent}") from None


def load_state(directory: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple[int, float] | None:
    """Load directory/state.pt into `model` and `optimizer`; (step, seconds), or None without one."""
    path = directory / STATE_FILE
    if not path.exists():
        return None
    try:
        state = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as error:  # truncated, empty, a pickle that asks for code: all unreadable
        raise damaged(path, f"not a readable training state ({_reason(error)})", move_online(directory.parent)) from None
    if not (isinstance(state, dict) and isinstance(state.get("model"), dict)
            and all(isinstance(v, torch.Tensor) for v in state["model"].values())
            and isinstance(state.get("optimizer"), dict) and _count(state.get("step"))
            and isinstance(state.get("seconds"), (int, float)) and math.isfinite(state["seconds"])):
        raise damaged(path, "not a training state (weights, optimizer, step, seconds)", move_online(directory.parent))
    try:
        model.load_state_dict({k: v.to(next(model.parameters()).device) for k, v in state["model"].items()})
        optimizer.load_state_dict(state["optimizer"])
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as error:
        raise damaged(path, f"does not fit the policy's model ({_reason(error)})",
                      "resume with the checkpoint the run was trained from (--policy NAME=local:PATH), "
                      f"or {move_online(directory.parent)}") from None
    return state["step"], float(state["seconds"])


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class Group:
    """One prompt's completions, as sampled: what a training step trains on."""

    asked: int  # the iteration the policy call that sampled it started at
    prompt: tuple[int, ...]
    completions: tuple[tuple[str, tuple[int, ...], str], ...]  # (text, token ids, finish reason)

    def write(self, directory: Path, iteration: int) -> None:
        data = {"asked": self.asked, "prompt": list(self.prompt),
                "completions": [[text, list(ids), finish] for text, ids, finish in self.completions]}
        write_atomic(directory / GROUPS / f"{iteration:08d}.json", json.dumps(data))

    @classmethod
    def read(cls, directory: Path, iteration: int, vocabulary: int) -> "Group":
        """The group of `iteration`; token ids must be below `vocabulary` (the model's embedding rows)."""
        path = directory / GROUPS / f"{iteration:08d}.json"
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            raise damaged(path, "missing (the run's groups are written before the loop journals them)",
                          move_online(directory.parent)) from None
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise damaged(path, f"unreadable ({_reason(error)})", move_online(directory.parent)) from None
        ids = lambda v: isinstance(v, list) and all(_count(t) and t < vocabulary for t in v)  # noqa: E731
        row = lambda c: (isinstance(c, list) and len(c) == 3 and isinstance(c[0], str) and ids(c[1])  # noqa: E731
                         and isinstance(c[2], str))
        if not (isinstance(raw, dict) and set(raw) == {"asked", "prompt", "completions"} and _count(raw["asked"])
                and ids(raw["prompt"]) and isinstance(raw["completions"], list) and raw["completions"]
                and all(map(row, raw["completions"]))):
            raise damaged(path, f"not a group of completions (token ids below {vocabulary})", move_online(directory.parent))
        return cls(raw["asked"], tuple(raw["prompt"]), tuple((t, tuple(i), f) for t, i, f in raw["completions"]))
