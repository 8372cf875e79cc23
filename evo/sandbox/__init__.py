"""The evaluator: sandboxed, warm, vector-valued. `from evo.sandbox import Sandbox`.

The package import stays light (the zygote process imports `evo.sandbox.zygote` and must
enter its namespaces before anything heavy is loaded); `Sandbox` is imported on use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evo.sandbox.pool import Sandbox

__all__ = ["Sandbox"]


def __getattr__(name: str) -> Any:
    if name == "Sandbox":
        from evo.sandbox.pool import Sandbox

        return Sandbox
    raise AttributeError(f"module 'evo.sandbox' has no attribute {name!r}")
