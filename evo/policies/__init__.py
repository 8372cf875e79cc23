"""Policies: `load(uri)` returns a Policy (see evo/policies/base.py).

    local:PATH          a Hugging Face causal-LM directory, or the name of a shipped checkpoint
    openai:URL#MODEL    an OpenAI-compatible server (options: ;chat ;logprobs ;token_ids ;concurrency=N ;timeout=S ;retries=N
                        ;backoff=S ;max_backoff=S; ranges in evo/policies/openai.py RANGES)
    vllm:PATH           vLLM's in-process engine (needs the `vllm` extra)
    mutate:             random AST edits of the parent program (options: mutate:max_edits=N,scale=X)
"""

from __future__ import annotations

from pathlib import Path

from evo.errors import UserError
from evo.policies.base import Completion, Policy

CHECKPOINTS = Path(__file__).resolve().parent.parent / "checkpoints"
SCHEMES = ("local", "openai", "vllm", "mutate")


def shipped_checkpoints() -> list[str]:
    """Names of the checkpoints shipped in evo/checkpoints/ (directories with a config.json)."""
    if not CHECKPOINTS.is_dir():
        return []
    return sorted(p.name for p in CHECKPOINTS.iterdir() if (p / "config.json").is_file())


def check_weights(directory: Path) -> Path:
    """`directory` when each of its safetensors files has a readable header that covers the
    file (a truncated or garbage file is a one-line UserError, not a loader's traceback)."""
    from safetensors import safe_open

    for path in sorted(Path(directory).glob("*.safetensors")):
        try:
            with safe_open(str(path), "pt"):
                pass
        except Exception as error:  # SafetensorError (bad header, truncated), OSError
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise UserError(f"{path}: not a readable weights file ({reason[:160]}); "
                            "restore it or point at another checkpoint") from None
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


def trained_answers(uri: str) -> int:
    """Programs per completion a `local:` / `vllm:` checkpoint was trained to write (its
    train_config.json: a set method's m), else 1."""
    import json

    scheme, _, rest = uri.partition(":")
    if scheme not in ("local", "vllm"):
        return 1
    config = resolve_checkpoint(rest) / "train_config.json"
    if not config.is_file():
        return 1
    try:
        data = json.loads(config.read_text())
        algo, m = data["algo"], int(data["answers"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError(f"{config}: unreadable training config ({error}); restore it, or give --answers M") from None
    from training.rollouts import answers_for  # which estimators train on sets (the estimator registry)

    return answers_for(algo, m)


def answers_for(uri: str, asked: int = 0) -> int:
    """Programs per reply for the policy at `uri`: `asked` when > 0 ([search] answers, --answers),
    else what its checkpoint was trained for."""
    return asked if asked > 0 else trained_answers(uri)


def prompt_style(uri: str, style: str) -> str:
    """The prompt style the policy at `uri` is asked in: the spec's `style`, except that
    `mutate:`, which edits the program it is shown, gets `full` prompts where the spec's are
    `continue` (a continuation shows only a random prefix of the parent's block)."""
    return "full" if style == "continue" and uri.partition(":")[0] == "mutate" else style


def load(uri: str, **options) -> Policy:
    """Build the policy a URI names; `options` go to its constructor (e.g. device="cpu")."""
    scheme, sep, rest = uri.partition(":")
    if not sep or scheme not in SCHEMES:
        raise UserError(f"unknown policy {uri!r}; use local:PATH, openai:URL#MODEL, vllm:PATH or mutate:")
    if scheme == "local":
        from evo.policies.local import LocalPolicy

        return LocalPolicy(resolve_checkpoint(rest), **options)
    if scheme == "openai":
        from evo.policies.openai import OpenAIPolicy, parse_uri

        policy = OpenAIPolicy(parse_uri(rest))
        policy.check()
        return policy
    if scheme == "vllm":
        from evo.policies.vllm_engine import VLLMPolicy

        return VLLMPolicy(resolve_checkpoint(rest), **options)
    from evo.policies.mutate import MutatePolicy, parse_options

    return MutatePolicy(parse_options(rest))


__all__ = ["Completion", "Policy", "check_weights", "load", "resolve_checkpoint", "shipped_checkpoints"]
