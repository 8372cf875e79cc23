"""A scorer for the hostile suite. A candidate chooses a hostile scorer behaviour with a
`# scorer: NAME` line; otherwise the candidate module is executed and scores (1, 0.5)."""

import importlib.util
import re


def _run_candidate(path):
    spec = importlib.util.spec_from_file_location("candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {"a": 1.0, "b": 0.5, "key": 3.0}


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
}


def evaluate(path):
    with open(path) as file:
        match = re.search(r"^# scorer: (\w+)", file.read(), re.MULTILINE)
    if match:
        return BEHAVIOURS[match.group(1)](path)
    return _run_candidate(path)
