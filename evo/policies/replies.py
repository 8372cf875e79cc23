"""What an OpenAI-compatible server's JSON replies must look like, checked field by field.

A reply of the wrong shape (`"text": 123`, `"token_ids": ["x"]`, `"data": null`, a missing
field) is a failed request: `MalformedReply` names the field and what was wrong, in one line.
"""

from __future__ import annotations

import math
from typing import Any

from evo.policies.base import Completion
from evo.policies.transport import one_line


class MalformedReply(ValueError):
    """A JSON reply whose shape is not the API's."""


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _expect(value: Any, kinds: type | tuple[type, ...], where: str, wanted: str) -> Any:
    """`value` when it is one of `kinds` (a bool is not an int here), else MalformedReply."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise MalformedReply(f"{where} is {shown} ({_kind(value)}), expected {wanted}")
    return value


def model_ids(reply: dict) -> list[str]:
    """The ids a `GET /models` reply lists."""
    data = _expect(reply.get("data"), list, "data", "a list of models")
    return [_expect(_expect(m, dict, f"data[{i}]", "an object").get("id"), str, f"data[{i}].id", "a string")
            for i, m in enumerate(data)]


def context_length(reply: dict, model: str) -> int | None:
    """The context `model` is served with, as vLLM's `GET /models` reply states it
    (`max_model_len`); None where the server does not say."""
    for entry in reply.get("data") or ():
        if isinstance(entry, dict) and entry.get("id") == model:
            length = entry.get("max_model_len")
            return length if isinstance(length, int) and not isinstance(length, bool) and length > 0 else None
    return None


def completions(reply: dict, n: int, chat: bool) -> list[Completion]:
    """The `n` completions of a `/completions` (or, with `chat`, `/chat/completions`) reply, by index."""
    if "choices" not in reply and isinstance(reply.get("error"), dict):
        raise MalformedReply(f"the server replied with an error: {one_line(str(reply['error'].get('message', '')))}")
    choices = _expect(reply.get("choices"), list, "choices", "a list")
    if len(choices) != n:
        raise MalformedReply(f"asked for n={n} completions, got {len(choices)}")
    indexed = []
    for i, choice in enumerate(choices):
        where = f"choices[{i}]"
        _expect(choice, dict, where, "an object")
        index = _expect(choice.get("index", i), int, f"{where}.index", "an integer")
        indexed.append((index, _completion(choice, where, chat)))
    if sorted(index for index, _ in indexed) != list(range(n)):
        raise MalformedReply(f"choice indices {sorted(index for index, _ in indexed)} are not 0..{n - 1}")
    return [completion for _, completion in sorted(indexed, key=lambda pair: pair[0])]


def usage(reply: dict) -> tuple[int, int]:
    """(prompt tokens, completion tokens) a reply's `usage` reports; (0, 0) when it reports none
    (the field is optional in the API: a missing or odd one is not a failed request)."""
    counted = reply.get("usage")
    if not isinstance(counted, dict):
        return 0, 0
    prompt, completion = (counted.get(key) for key in ("prompt_tokens", "completion_tokens"))
    return _count(prompt), _count(completion)


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _completion(choice: dict, where: str, chat: bool) -> Completion:
    if chat:
        message = _expect(choice.get("message"), dict, f"{where}.message", "an object")
        text = _expect(message.get("content"), (str, type(None)), f"{where}.message.content", "a string")
    else:
        if "text" not in choice:
            raise MalformedReply(f"{where} has no text")
        text = _expect(choice["text"], (str, type(None)), f"{where}.text", "a string")
    finish = _expect(choice.get("finish_reason"), (str, type(None)), f"{where}.finish_reason", "a string")
    ids = _expect(choice.get("token_ids", []), (list, type(None)), f"{where}.token_ids", "a list of token ids")
    for j, token in enumerate(ids or ()):
        if not isinstance(token, int) or isinstance(token, bool) or token < 0:
            raise MalformedReply(f"{where}.token_ids[{j}] is {token!r}, expected a token id (an integer >= 0)")
    return Completion(text or "", tuple(ids or ()), _logprobs(choice.get("logprobs"), f"{where}.logprobs"),
                      "length" if finish == "length" else "stop")


def _logprobs(lp: Any, where: str) -> tuple[float, ...] | None:
    """Per-token log-probabilities: `token_logprobs` (completions) or `content[].logprob` (chat)."""
    if lp is None:
        return None
    _expect(lp, dict, where, "an object")
    if lp.get("token_logprobs") is not None:
        values, path = _expect(lp["token_logprobs"], list, f"{where}.token_logprobs", "a list"), "token_logprobs[{}]"
    elif lp.get("content") is not None:
        entries = _expect(lp["content"], list, f"{where}.content", "a list")
        values = [_expect(e, dict, f"{where}.content[{j}]", "an object").get("logprob") for j, e in enumerate(entries)]
        path = "content[{}].logprob"
    else:
        return None
    for j, value in enumerate(values):
        _expect(value, (int, float), f"{where}.{path.format(j)}", "a number")
        if math.isnan(value):
            raise MalformedReply(f"{where}.{path.format(j)} is NaN, expected a log-probability")
    return tuple(float(v) for v in values)
