"""experiments/maze/zero_routes.py: each route of a set gets the first reason it scores zero."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import tasks

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "maze" / "zero_routes.py"


@pytest.fixture(scope="module")
def zero_routes():
    spec = importlib.util.spec_from_file_location("zero_routes", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_routes_are_classified_slot_by_slot(zero_routes):
    task = tasks.get("maze-notes")
    instance = task.instances("test", 1, seed=3)[0]
    route = task.demonstrations(instance, 1, np.random.default_rng(0))
    start = route[:2]
    jump = start + ("a0" if start != "a0" else "c2")  # two cells that are not adjacent: an illegal step
    assert zero_routes.classify(task, instance, f"{route}|{route}|x?", True, 3) == ["valid", "repeat", "malformed"]
    assert zero_routes.classify(task, instance, f"{jump}|{start}", True, 3) == ["illegal step", "misses the exit", "malformed"]
    assert zero_routes.classify(task, instance, f"{route}|{route[:4]}", False, 3) == ["valid", "cut off", "cut off"]
