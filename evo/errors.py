"""Errors a user can cause. The CLI prints them as one line and exits with `exit_code`."""

from __future__ import annotations


class UserError(Exception):
    """Something the user can fix (bad spec, bad path, unreachable server). Exit code 2."""

    exit_code = 2


class WorkFailed(UserError):
    """The requested work ran but failed (e.g. the initial program does not evaluate). Exit code 1."""

    exit_code = 1
