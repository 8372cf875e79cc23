"""Range rules for policy settings: the sampling arguments of every `generate` call and the
numeric options a policy URI carries (`openai:...;timeout=S`, `mutate:max_edits=N`).

Each rule lives here once; the policies check their arguments and configs against it, and the
CLI's option types (evo/commands/params.py) check flags against the same rule before any
policy is built or any request is sent.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from typing import Any

from evo.errors import UserError


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


@dataclass(frozen=True)
class Range:
    """A closed interval [low, high] of finite numbers; `open_low` excludes low; `integer` wants an int."""

    low: float
    high: float = math.inf
    open_low: bool = False
    integer: bool = False

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a finite number"
        if self.high == math.inf:
            return f"{kind} {'>' if self.open_low else '>='} {self.low:g}"
        return f"{kind} in {'(' if self.open_low else '['}{self.low:g}, {self.high:g}]"

    def problem(self, value: Any) -> str | None:
        """None when `value` fits, else what is wrong with it (one line)."""
        wanted = numbers.Integral if self.integer else numbers.Real  # numpy scalars too
        if not isinstance(value, wanted) or isinstance(value, bool):
            return f"expected {self.describe()}, got {_short(value)}"
        if isinstance(value, numbers.Integral) and int(value).bit_length() > 64:  # too large for a float
            return f"expected {self.describe()}, got an integer of {int(value).bit_length()} bits"
        number = float(value)  # a Real, or an Integral of at most 64 bits
        too_low = number <= self.low if self.open_low else number < self.low
        if not math.isfinite(number) or too_low or number > self.high:
            return f"expected {self.describe()}, got {_short(value)}"
        return None

    def parse(self, text: str) -> int | float:
        """The number `text` spells (int or float as the rule wants); ValueError with the rule if not."""
        try:
            value = int(text) if self.integer else float(text)
        except ValueError:
            raise ValueError(f"expected {self.describe()}, got {_short(text)}") from None
        problem = self.problem(value)
        if problem:
            raise ValueError(problem)
        return value


GREEDY_BELOW = 1e-5  # a temperature under this samples greedily (vLLM's threshold too)
SAMPLING: dict[str, Range] = {
    "n": Range(1, integer=True),
    "max_new_tokens": Range(1, integer=True),
    "temperature": Range(0.0),  # 0 is greedy
    "top_p": Range(0.0, 1.0, open_low=True),
}


def check_sampling(who: str, *, n: int, max_new_tokens: int, temperature: float, top_p: float) -> None:
    """Raise a one-line UserError when a sampling argument is out of range (before anything is sent)."""
    given = {"n": n, "max_new_tokens": max_new_tokens, "temperature": temperature, "top_p": top_p}
    for name, value in given.items():
        problem = SAMPLING[name].problem(value)
        if problem:
            raise UserError(f"{who}: {name}: {problem}")


def check_config(who: str, config: object, rules: dict[str, Range]) -> None:
    """Check a frozen config dataclass's numeric fields against `rules`; one-line UserError."""
    for f in fields(config):  # type: ignore[arg-type]
        rule = rules.get(f.name)
        problem = rule and rule.problem(getattr(config, f.name))
        if problem:
            raise UserError(f"{who}: option {f.name}: {problem}")


def parse_option(who: str, key: str, text: str, rules: dict[str, Range]) -> int | float:
    """`key=text` from a policy URI as the number its rule wants; one-line UserError otherwise."""
    try:
        return rules[key].parse(text)
    except ValueError as error:
        raise UserError(f"{who}: option {key}: {error}") from None
