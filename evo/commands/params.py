"""Click option types for the sampling settings, checked by the policies' own range rules
(evo/policies/options.py), so a bad value is refused before any policy is built or called;
and the NAME=VALUE pairs of `--policy` (evo compare, evo run) and `--answers`."""

from __future__ import annotations

import click

from evo.errors import UserError
from evo.policies.options import SAMPLING


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


def policy_uris(values: tuple[str, ...]) -> dict[str, str]:
    """`--policy NAME=URI` (repeatable) or a bare `--policy URI`, named by itself: a URI has its
    scheme (`mutate:`, `openai:...`) before any '=', a name has no ':'."""
    named: dict[str, str] = {}
    for value in values:
        name, sep, _ = value.partition("=")
        pair = parse_pairs((value,), "--policy") if sep and ":" not in name else {value: value}
        if set(pair) & set(named):
            raise UserError(f"--policy {next(iter(pair))!r} is given twice")
        named.update(pair)
    return named


class SamplingParam(click.ParamType):
    """`--temperature`, `--top-p`, `--max-new-tokens`: the number the rule for `name` accepts."""

    def __init__(self, name: str) -> None:
        self.rule = SAMPLING[name]
        self.name = "integer" if self.rule.integer else "float"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            problem = self.rule.problem(value)
            return value if problem is None else self.fail(problem, param, ctx)
        try:
            return self.rule.parse(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


TEMPERATURE = SamplingParam("temperature")
TOP_P = SamplingParam("top_p")
MAX_NEW_TOKENS = SamplingParam("max_new_tokens")
