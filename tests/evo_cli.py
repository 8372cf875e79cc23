"""Running `evo ...` in the test's own process, for the refusals that stop before any work."""

from __future__ import annotations

import pytest


def refused(capsys, *args: str) -> str:
    """The one line `evo ARGS` stops with (exit code 2)."""
    from evo.cli import main

    with pytest.raises(SystemExit) as stop:
        main(list(args))
    assert stop.value.code == 2
    return capsys.readouterr().err
