"""A scorer for the hostile suite. A candidate chooses a hostile scorer behaviour with a
`# scorer: NAME` line; otherwise the candidate module is loaded (through
evo.sandbox.candidate) and scores (1, 0.5), or (1, its `bonus()`) when it has one."""

import re

from evo.sandbox import candidate


def _run_candidate(path):
    program = candidate.load(path)
    b = program.bonus() if "bonus" in dir(program) else 0.5
    return {"a": 1.0, "b": min(max(float(b), 0.0), 0.5), "key": 3.0}


def _forever(path):
    while True:
        pass


class _Number:
    def __float__(self):
        return 1.0


BEHAVIOURS = {
    "nan": lambda path: {"a": float("nan"), "b": 1.0, "key": 1.0},
    "inf": lambda path: {"a": 1.0, "b": float("-inf"), "key": 1.0},
    "string_value": lambda path: {"a": "1.0", "b": 1.0, "key": 1.0},
    "returns_string": lambda path: "1.0, 0.5",
    "returns_none": lambda path: None,
    "wrong_length": lambda path: [1.0, 0.5, 0.25],
    "missing_objective": lambda path: {"a": 1.0, "key": 1.0},
    "missing_feature_key": lambda path: {"a": 1.0, "b": 1.0},
    "odd_number_type": lambda path: {"a": _Number(), "b": 1.0, "key": 1.0},
    "generator": lambda path: (x for x in (1.0, 0.5)),
    "keyboard_interrupt": lambda path: (_ for _ in ()).throw(KeyboardInterrupt()),
    "system_exit": lambda path: (_ for _ in ()).throw(SystemExit(3)),
    "forever": _forever,
    "huge_int": lambda path: {"a": 10 ** 400, "b": 1.0, "key": 1.0},
    "huge_float": lambda path: {"a": 1e300, "b": 1.0, "key": 1.0},
    "many_extras": lambda path: {"a": 1.0, "b": 1.0, "key": 1.0, **{f"x{i}": 1.0 for i in range(200_000)}},
    "long_key": lambda path: {"a": 1.0, "b": 1.0, "key": 1.0, "k" * 100_000: 1.0},
    "prints_then_scores": lambda path: print("\x00\x00\x00\x05junk!" * 100) or {"a": 1.0, "b": 0.5, "key": 3.0},
}


def evaluate(path):
    with open(path) as file:
        match = re.search(r"^# scorer: (\w+)", file.read(), re.MULTILINE)
    if match:
        return BEHAVIOURS[match.group(1)](path)
    return _run_candidate(path)
