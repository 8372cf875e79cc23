#!/usr/bin/env bash
# Build the separate virtual env that tests/test_verl.py runs in under veRL itself (veRL 0.9.1
# pins transformers < 5.11, which this project's env does not: it resolves a newer one), then
# print the path of its python for VPO_EVO_VERL_PYTHON.
#   export VPO_EVO_VERL_PYTHON="$(.ci/verl-env.sh | tail -n 1)"
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/venv.sh
VERL_VERSION="${VERL_VERSION:-0.9.1}"  # the version training/integrations/verl.py was read against
venv "${VPO_EVO_VERL_VENV:-.venv-verl}"
if ! "$PY" -c "import verl.trainer.ppo.reward" 2>/dev/null; then
    # the CPU torch first (a plain torch requirement would pull the CUDA build), then veRL and what it pins
    "$PY" -m pip install -q "${EXTRA[@]}" "torch==2.13.0" >&2
    "$PY" -m pip install -q "${EXTRA[@]}" "torch==2.13.0" "verl==$VERL_VERSION" >&2
fi
install_project pytest hypothesis psutil  # and what tests/test_verl.py runs with there
"$PY" -c "import verl, torch, transformers; print('verl', verl.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)" >&2
"$PY" -c "import sys; print(sys.executable)"
