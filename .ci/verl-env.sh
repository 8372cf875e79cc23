#!/usr/bin/env bash
# Build the separate virtual env that tests/test_verl.py runs in under veRL itself (veRL 0.9.1
# pins transformers < 5.11, which this project's env does not: it resolves a newer one), then
# print the path of its python for VPO_EVO_VERL_PYTHON.
#   export VPO_EVO_VERL_PYTHON="$(.ci/verl-env.sh | tail -n 1)"
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
VENV="${VPO_EVO_VERL_VENV:-.venv-verl}"
VERL_VERSION="${VERL_VERSION:-0.9.1}"  # the version training/integrations/verl.py was read against
TORCH_INDEX="${VPO_EVO_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
EXTRA=()
if python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)" "$TORCH_INDEX/torch/" 2>/dev/null; then
    EXTRA=(--extra-index-url "$TORCH_INDEX")
fi

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
if ! "$PY" -c "import verl.trainer.ppo.reward" 2>/dev/null; then
    # the CPU torch first (a plain torch requirement would pull the CUDA build), then veRL and what it pins
    "$PY" -m pip install -q "${EXTRA[@]}" "torch==2.13.0" >&2
    "$PY" -m pip install -q "${EXTRA[@]}" "torch==2.13.0" "verl==$VERL_VERSION" >&2
fi
# Our package without deps (veRL pins transformers), the core deps veRL does not bring, and pytest.
"$PY" -m pip install -q --no-deps -e . >&2
"$PY" -m pip install -q "${EXTRA[@]}" scipy networkx click tqdm pytest hypothesis psutil >&2
"$PY" -c "import verl, torch, transformers; print('verl', verl.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)" >&2
"$PY" -c "import sys; print(sys.executable)"
