"""The evaluator: sandboxed, warm, vector-valued. `from evo.sandbox import Sandbox, SandboxLimits`.

Its public face, the one tasks/ may use: this package (Sandbox, SandboxLimits) and
`evo.sandbox.candidate` (what a scorer calls a candidate program through).

The package import stays light (the zygote process imports `evo.sandbox.zygote` and must
enter its namespaces before anything heavy is loaded); `Sandbox` is imported on use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evo.sandbox.pool import Sandbox
    from evo.spec import SandboxLimits

__all__ = ["Sandbox", "SandboxLimits"]


def __getattr__(name: str) -> Any:
    if name == "Sandbox":
        from evo.sandbox.pool import Sandbox

        return Sandbox
    if name == "SandboxLimits":
        from evo.spec import SandboxLimits

        return SandboxLimits
    raise AttributeError(f"module 'evo.sandbox' has no attribute {name!r}")
