"""Keep a command's standard output for its result: what libraries print while it works
(DeepSpeed's "Setting accelerator to CPU" when transformers saves a model, vLLM's workers)
goes to standard error instead, so `evo train ... | tail -1` or `| jq` reads only the JSON.

    with output_to_stderr():
        config, records = train(...)
    click.echo(json.dumps(summary))   # the only line on stdout
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def output_to_stderr() -> Iterator[None]:
    """Inside: Python's sys.stdout and file descriptor 1 (child processes, C code) write to
    standard error; both are put back on the way out."""
    sys.stdout.flush()
    try:
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else -1
    except (OSError, ValueError):  # no real descriptor (an embedding host, a test runner's stream)
        fd = -1
    err = sys.__stderr__.fileno() if fd >= 0 and sys.__stderr__ is not None else -1
    saved = os.dup(fd) if err >= 0 else -1
    if saved >= 0:
        os.dup2(err, fd)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        if saved >= 0:
            os.dup2(saved, fd)
            os.close(saved)
