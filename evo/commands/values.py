"""The values of the commands' flags: NAME=VALUE pairs (`--policy`, `--answers`, `--train`),
`KEY=VALUE` options, and the spec overrides of the `--name` flags and `--set KEY=VALUE`. Each
is one-line UserError on a bad value. (The click option types and flag sets: params.py.)"""

from __future__ import annotations

import ast
import json
import tomllib

from evo import spec as specs
from evo.errors import UserError

SECTIONS = {"sandbox": specs.SandboxLimits, "search": specs.SearchSettings, "prompt": specs.PromptSettings}
_TABLES = ("selection_options", "policy_weights")  # [search] keys whose flag takes an inline TOML table


def parse_pairs(values: tuple[str, ...], what: str) -> dict[str, str]:
    """NAME=VALUE options into a dict in the order given; a one-line UserError otherwise."""
    pairs: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not rest:
            raise UserError(f"{what} {value!r}: expected NAME=VALUE, e.g. --policy vpo=local:maze-vpo")
        if name in pairs:
            raise UserError(f"{what} {name!r} is given twice")
        pairs[name] = rest
    return pairs


def answers_pairs(values: tuple[str, ...], policies) -> dict[str, int]:
    """`--answers NAME=M` (programs per reply for the named policy) into name -> M in 1..[search] answers' maximum."""
    forced = parse_pairs(values, "--answers")
    unknown = sorted(set(forced) - set(policies))
    if unknown:
        raise UserError(f"--answers names {unknown}, which are not among the policies {sorted(policies)}")
    answers, high = {}, specs.SearchSettings.MAXIMUM["answers"]
    for name, text in forced.items():
        try:
            answers[name] = int(text)
        except ValueError:
            answers[name] = 0
        if not 1 <= answers[name] <= high:
            raise UserError(f"--answers {name}={text}: expected an integer in 1..{high}")
    return answers


def policy_uris(values: tuple[str, ...]) -> dict[str, str]:
    """`--policy NAME=URI` (repeatable) or a bare `--policy URI`, named by itself: a URI has its
    scheme (`mutate:`, `openai:...`) before any '=', a name has no ':'."""
    named: dict[str, str] = {}
    for value in values:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise UserError(f"--policy {value!r} is not valid UTF-8 text; a policy's name and URI are stored with "
                            "every program it proposes") from None
        name, sep, _ = value.partition("=")
        pair = parse_pairs((value,), "--policy") if sep and ":" not in name else {value: value}
        if set(pair) & set(named):
            raise UserError(f"--policy {next(iter(pair))!r} is given twice")
        named.update(pair)
    return named


def parse_options(pairs: tuple[str, ...]) -> dict:
    """`KEY=VALUE` estimator options; values are Python literals (100, 0.5, True)."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--option expects KEY=VALUE, got {pair!r}")
        try:
            options[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            options[key] = value
    return options


def _parse_value(text: str) -> object:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def spec_overrides(options: dict, sets: tuple[str, ...]) -> dict[str, object]:
    """Dotted spec overrides from the `--name` flags and `--set KEY=VALUE` pairs."""
    overrides: dict[str, object] = {}
    for name, value in options.items():
        section, _, key = name.partition("__")
        if section in SECTIONS and value is not None:
            if key in _TABLES and isinstance(value, str):  # --policy-weights '{fast = 3, big = 1}'
                value = _parse_value(value)
            if key == "topology" and isinstance(value, str) and value.lstrip().startswith("["):
                value = _parse_value(value)
                if isinstance(value, str):
                    raise UserError(f"--topology {value!r}: expected a topology name or a list of island pairs, "
                                    "e.g. --topology '[[0, 1], [1, 2]]'")
            overrides[f"{section}.{key}"] = value
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--set {item!r}: expected KEY=VALUE, e.g. --set features.length.bins=20")
        overrides[key.strip()] = _parse_value(value.strip())
    for key, value in overrides.items():  # stored in run.json and used in every prompt: valid text only
        try:
            json.dumps({key: value}, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise UserError(f"--set/--{key.rpartition('.')[2].replace('_', '-')}: {value!r} is not valid UTF-8 text") from None
    return overrides
