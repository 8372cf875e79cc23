# Sourced by .ci/vllm-env.sh and .ci/verl-env.sh, which each build a separate virtual env for
# a package that pins its own transformers: quiet pip, PyTorch's CPU index when it answers (else
# a local wheel dir in pip's config serves torch 2.13.0+cpu), and `venv DIR`, which creates the
# env once and sets PY to its python.
export PIP_DISABLE_PIP_VERSION_CHECK=1
TORCH_INDEX="${VPO_EVO_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
EXTRA=()
if python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)" "$TORCH_INDEX/torch/" 2>/dev/null; then
    EXTRA=(--extra-index-url "$TORCH_INDEX")
fi

venv() {
    if [ ! -x "$1/bin/python" ]; then
        python3 -m venv "$1"
    fi
    PY="$1/bin/python"
}

# This package without its deps (the env's own package pins torch and transformers), plus the
# core deps it does not bring and any named after them.
install_project() {
    "$PY" -m pip install -q --no-deps -e . >&2
    "$PY" -m pip install -q "${EXTRA[@]}" scipy networkx click tqdm "$@" >&2
}
