"""Click option types: the sampling settings, checked by the policies' own range rules
(evo/policies/options.py), so a bad value is refused before any policy is built or called;
the NAME=VALUE pairs of `--policy` (evo compare, evo run) and `--answers`; flags whose
defaults are a config dataclass's fields; choices read from a registry."""

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


def answers_pairs(values: tuple[str, ...], policies) -> dict[str, int]:
    """`--answers NAME=M` (programs per reply for the named policy) into name -> M >= 1."""
    forced = parse_pairs(values, "--answers")
    unknown = sorted(set(forced) - set(policies))
    if unknown:
        raise UserError(f"--answers names {unknown}, which are not among the policies {sorted(policies)}")
    answers = {}
    for name, text in forced.items():
        try:
            answers[name] = int(text)
        except ValueError:
            raise UserError(f"--answers {name}={text}: expected a positive integer") from None
        if answers[name] < 1:
            raise UserError(f"--answers {name}={text}: expected a positive integer")
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


class ConfigOption(click.Option):
    """A flag whose default is the field of the same name in a frozen config dataclass
    ("module:Class", e.g. training.config:TrainConfig), read when first needed: the configs
    live in `training/`, which imports torch, and `evo --help` imports every command module."""

    def __init__(self, *decls, config: str, **attrs) -> None:
        super().__init__(*decls, show_default=True, **attrs)
        self.config = config

    def get_default(self, ctx: click.Context, call: bool = True):
        return config_default(self.config, self.name)


def config_default(config: str, name: str):
    """The default of field `name` of the dataclass "module:Class"."""
    import dataclasses
    import importlib

    module, _, cls = config.partition(":")
    field = {f.name: f for f in dataclasses.fields(getattr(importlib.import_module(module), cls))}[name]
    return field.default_factory() if field.default is dataclasses.MISSING else field.default


class LazyChoice(click.Choice):
    """A choice among the names of a registry or tuple ("module:NAME"), read when first needed."""

    def __init__(self, names: str) -> None:
        self.names = names
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:
        import importlib

        module, _, name = self.names.partition(":")
        return tuple(sorted(getattr(importlib.import_module(module), name)))
