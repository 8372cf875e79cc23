"""Click option types the commands share: a sampling setting checked by the policies' own range
rules (evo/policies/options.py), so a bad value is refused before any policy is built or
called; a flag whose default is a config dataclass's field; a choice read from a registry when
it is used; a renamed flag that stops with one line naming its new name."""

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


class ConfigOption(click.Option):
    """A flag whose default is the field of the same name in a frozen config dataclass
    ("module:Class", e.g. training.config:TrainConfig), read when first needed: the configs
    live in `training/`, which imports torch, and `evo --help` imports every command module."""

    def __init__(self, *decls, config: str, **attrs) -> None:
        super().__init__(*decls, **{"show_default": True, **attrs})
        self.config = config

    def get_default(self, ctx: click.Context, call: bool = True):
        return config_default(self.config, self.name)


def config_default(config: str, name: str):
    """The default of field `name` of the dataclass "module:Class"."""
    import dataclasses
    import importlib

    module, _, cls = config.partition(":")
    field = {f.name: f for f in dataclasses.fields(getattr(importlib.import_module(module), cls))}[name]
    if field.default is not dataclasses.MISSING:
        return field.default
    if callable(field.default_factory):
        return field.default_factory()
    raise ValueError(f"{config}: field {name} has no default")


class LazyChoice(click.Choice):
    """A choice among the names of a registry or tuple ("module:NAME"), read when first needed."""

    def __init__(self, names: str) -> None:
        self.names = names
        self.case_sensitive = True

    @property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]  # (click.Choice keeps them in an attribute; read lazily here)
        import importlib

        module, _, name = self.names.partition(":")
        return tuple(sorted(getattr(importlib.import_module(module), name)))


def renamed(new: str):
    """The callback of a flag that was renamed: used, it stops with one line naming the new flag."""

    def refuse(ctx: click.Context, param: click.Parameter, value: object) -> None:
        if value is not None:
            raise click.UsageError(f"{param.opts[0]} is now {new} (one stop rule for every training path: "
                                   "docs/training.md)", ctx)

    return refuse
