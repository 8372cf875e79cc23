"""Click option types: the sampling settings, checked by the policies' own range rules
(evo/policies/options.py), so a bad value is refused before any policy is built or called;
the NAME=VALUE pairs of `--policy` (evo compare, evo run) and `--answers`; flags whose
defaults are a config dataclass's fields; choices read from a registry; the `--option KEY=VALUE`
estimator options; the spec-override flags and `--set KEY=VALUE`. The commands share option
parsing through this module only, never by importing each other."""

from __future__ import annotations

import ast
import json
import tomllib
import types
import typing
from dataclasses import fields
from pathlib import Path

import click

from evo import spec as specs
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


_SECTIONS = {"sandbox": specs.SandboxLimits, "search": specs.SearchSettings, "prompt": specs.PromptSettings}


def _click_type(annotation: object) -> type:
    kinds = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    if bool in kinds:
        return bool
    for kind in (int, float):
        if kind in kinds and str not in kinds:
            return kind
    return str


def spec_options(command):
    """One `--name` flag per spec setting ([sandbox], [search], [prompt]); `--set` for the rest."""
    hints = {section: typing.get_type_hints(cls) for section, cls in _SECTIONS.items()}
    for section, cls in reversed(_SECTIONS.items()):
        for f in reversed(fields(cls)):
            flag = "--" + f.name.replace("_", "-")
            command = click.option(flag, f"{section}__{f.name}", type=_click_type(hints[section][f.name]),
                                   default=None, help=f"override [{section}] {f.name}")(command)
    return command


_TABLES = ("selection_options", "policy_weights")  # [search] keys whose flag takes an inline TOML table


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
        if section in _SECTIONS and value is not None:
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


def compare_options(command):
    """The flags both modes of `evo compare` take (--task and --spec): the policies and the output."""
    shared = [
        click.option("--policy", "policies", multiple=True, metavar="NAME=URI",
                     help="a policy to compare (repeatable; the first is the baseline)"),
        click.option("--answers", multiple=True, metavar="NAME=M",
                     help="programs per reply for a policy (default: from its train_config.json, else 1)"),
        click.option("--seed", default=0, show_default=True, type=int),
        click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("runs/compare"),
                     show_default=True),
        click.option("--json", "as_json", is_flag=True, help="print the result as one JSON object"),
        click.option("--quiet", is_flag=True, help="no progress bar"),
    ]
    for option in reversed(shared):
        command = option(command)
    return command


RUN_PREFIX = "loop__"  # the keyword names of run_options' flags


def run_options(command):
    """One flag per field of the loop's RunOptions (--batch, --depth, --max-new-tokens, ...), unset
    by default (a new run: the field's default; a resumed run: its stored value)."""
    from evo.loop import RunOptions

    for f in reversed(fields(RunOptions)):
        rule = f.metadata
        kind = SamplingParam(f.name) if rule["sampling"] else click.IntRange(min=rule["minimum"])
        default = "" if f.default is None else f" (default {f.default})"
        command = click.option("--" + f.name.replace("_", "-"), RUN_PREFIX + f.name, type=kind, default=None,
                               help=rule["help"] + default)(command)
    return command


def run_options_given(options: dict) -> dict:
    """The RunOptions fields set by run_options' flags: name -> value (unset flags left out)."""
    return {name[len(RUN_PREFIX):]: value for name, value in options.items()
            if name.startswith(RUN_PREFIX) and value is not None}


def renamed(new: str):
    """The callback of a flag that was renamed: used, it stops with one line naming the new flag."""

    def refuse(ctx: click.Context, param: click.Parameter, value: object) -> None:
        if value is not None:
            raise click.UsageError(f"{param.opts[0]} is now {new} (one stop rule for every training path: "
                                   "docs/training.md)", ctx)

    return refuse
