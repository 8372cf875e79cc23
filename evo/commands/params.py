"""Click option types for the sampling settings, checked by the policies' own range rules
(evo/policies/options.py), so a bad value is refused before any policy is built or called."""

from __future__ import annotations

import click

from evo.policies.options import SAMPLING


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
