"""RUN/online/'s torch state and group files (training/online.py), written atomically and
typed and validated on read (the JSON settings and metrics: evo/training_log.py).

    state.pt                 {"model": weights, "optimizer": AdamW's state, "step": int, "seconds": float},
                             read with weights_only=True: a planted pickle cannot run code
    groups/NNNNNNNN.json     {"asked": int, "prompt": [token id, ...], "completions": [[text, [token id, ...], finish], ...],
                              "front": [[score, ...], ...]}   (as the loop told it: evo.loop.Told)
    outcomes/NNNNNNNN.json   {"kinds": [code, ...], "scores": [[score, ...] or null, ...]}   (evo.loop.Committed,
                              as training/search_signal.outcome makes it: one entry per journal slot)

Every failure to read or write them is a one-line UserError that names the file and what to
do; a failed save leaves the previous state in place. A group is checked against the run it is
read for (group_problem): G completions as the loop asks and journals them, each finished by
stop or length, token ids below the vocabulary and present wherever there is text, a prompt,
`asked` no later than its own iteration.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from evo.errors import UserError
from evo.policies.base import FINISH_REASONS
from evo.training_log import damaged, move_online, write_atomic

STATE_FILE, GROUPS, OUTCOMES = "state.pt", "groups", "outcomes"


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


def _vector(value: object, d: int) -> bool:
    return isinstance(value, list) and len(value) == d and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)


def _read_json(path: Path, missing: str) -> object:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise damaged(path, f"missing ({missing})", move_online(path.parent.parent.parent)) from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise damaged(path, f"unreadable ({_reason(error)})", move_online(path.parent.parent.parent)) from None


@dataclass(frozen=True)
class Group:
    """One prompt's completions, as sampled and told: what a training step trains on."""

    asked: int  # the iteration the policy call that sampled it started at
    prompt: tuple[int, ...]
    completions: tuple[tuple[str, tuple[int, ...], str], ...]  # (text, token ids, finish reason)
    front: np.ndarray  # (p, d) the front F the prompt was built against

    @property
    def truncated(self) -> list[bool]:
        """Per completion: whether the token budget cut it (it did not end by itself)."""
        return [finish != "stop" for _, _, finish in self.completions]

    def write(self, directory: Path, iteration: int) -> None:
        data = {"asked": self.asked, "prompt": list(self.prompt),
                "completions": [[text, list(ids), finish] for text, ids, finish in self.completions],
                "front": self.front.tolist()}
        write_atomic(directory / GROUPS / f"{iteration:08d}.json", json.dumps(data))

    @classmethod
    def read(cls, directory: Path, iteration: int, vocabulary: int, d: int, completions: int) -> "Group":
        """The group of `iteration`, checked against the run: `completions` of them (G, as the
        loop asks and journals them), token ids below `vocabulary` (the model's embedding rows),
        the front's rows `d` finite scores; a damaged file is one line naming it."""
        path = directory / GROUPS / f"{iteration:08d}.json"
        raw = _read_json(path, "the run's groups are written before the loop journals them")
        problem = group_problem(raw, iteration, vocabulary, d, completions)
        if problem:
            raise damaged(path, problem, move_online(directory.parent))
        assert isinstance(raw, dict)  # group_problem checked its shape
        return cls(raw["asked"], tuple(raw["prompt"]), tuple((t, tuple(i), f) for t, i, f in raw["completions"]),
                   np.array(raw["front"], dtype=np.float64).reshape(-1, d))


def group_problem(raw: object, iteration: int, vocabulary: int, d: int, completions: int) -> str:
    """Why `raw` (a group file's JSON) is not iteration `iteration`'s group of `completions`
    completions, or '' when it is."""
    ids = lambda v: isinstance(v, list) and all(_count(t) and t < vocabulary for t in v)  # noqa: E731
    row = lambda c: isinstance(c, list) and len(c) == 3 and isinstance(c[0], str) and ids(c[1])  # noqa: E731
    if not (isinstance(raw, dict) and set(raw) == {"asked", "prompt", "completions", "front"} and _count(raw["asked"])
            and ids(raw["prompt"]) and isinstance(raw["completions"], list) and all(map(row, raw["completions"]))
            and isinstance(raw["front"], list) and all(_vector(v, d) for v in raw["front"])):
        return f"not a group of completions (token ids below {vocabulary}, a front of {d} objectives)"
    if len(raw["completions"]) != completions:
        return (f"holds {len(raw['completions'])} completions, and the run asks and journals {completions} per prompt "
                "(the file was edited, or the run's settings changed)")
    if raw["asked"] > iteration:
        return f"asked at iteration {raw['asked']}, after its own iteration {iteration}"
    if not raw["prompt"]:
        return "no prompt token ids"
    for j, (text, token_ids, finish) in enumerate(raw["completions"]):
        if finish not in FINISH_REASONS:
            return f"completion {j} finished by {str(finish)[:20]!r}, not one of {', '.join(FINISH_REASONS)}"
        if text and not token_ids:
            return f"completion {j} has text but no token ids"
    return ""


@dataclass(frozen=True)
class Outcome:
    """What one prompt's journal slots became, as the loop committed them."""

    kinds: np.ndarray  # (slots,) training.search_signal.KINDS codes
    scores: np.ndarray  # (slots, d); NaN rows where there is no score

    def write(self, directory: Path, iteration: int) -> None:
        scores = [None if np.isnan(row).any() else row.tolist() for row in self.scores]
        write_atomic(directory / OUTCOMES / f"{iteration:08d}.json", json.dumps({"kinds": self.kinds.tolist(), "scores": scores}))

    @classmethod
    def read(cls, directory: Path, iteration: int, slots: int, d: int, kinds: int) -> "Outcome":
        """The outcome of `iteration`: `slots` entries, codes below `kinds`, scores of `d` objectives."""
        path = directory / OUTCOMES / f"{iteration:08d}.json"
        raw = _read_json(path, "an iteration's outcome is written before the loop inserts it")
        if not (isinstance(raw, dict) and set(raw) == {"kinds", "scores"} and isinstance(raw["kinds"], list)
                and isinstance(raw["scores"], list) and len(raw["kinds"]) == len(raw["scores"]) == slots
                and all(_count(k) and k < kinds for k in raw["kinds"])
                and all(v is None or _vector(v, d) for v in raw["scores"])):
            raise damaged(path, f"not the outcome of {slots} proposals with {d} objectives (the run's settings may have "
                          "changed since it was written)", move_online(directory.parent))
        scores = np.array([[np.nan] * d if v is None else v for v in raw["scores"]], dtype=np.float64).reshape(slots, d)
        return cls(np.array(raw["kinds"], dtype=np.int64), scores)
