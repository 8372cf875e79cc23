"""Task families with vector rewards. `tasks.get(name)` returns a registered Task."""

from __future__ import annotations

from tasks.base import Instance, ParseError, Task, TemplateMismatch

_FACTORIES: dict[str, str] = {
    # name: "module:factory" (imported lazily)
    "maze": "tasks.maze:MazeTask",
    "maze-chat": "tasks.maze:chat",
    "maze-notes": "tasks.maze:with_notes",
    "maze-clusters": "tasks.maze:with_clusters",
    "symreg": "tasks.symreg:SymregTask",
    "humaneval": "tasks.humaneval:HumanEvalTask",
}


class UnknownTask(LookupError):
    """No task family of that name is registered."""


def names() -> list[str]:
    return sorted(_FACTORIES)


def get(name: str) -> Task:
    import importlib

    if name not in _FACTORIES:
        raise UnknownTask(f"unknown task {name!r}; registered tasks: {', '.join(names()) or 'none'}")
    module, factory = _FACTORIES[name].split(":")
    return getattr(importlib.import_module(module), factory)()


__all__ = ["Instance", "ParseError", "Task", "TemplateMismatch", "UnknownTask", "get", "names"]
