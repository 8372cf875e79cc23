#!/usr/bin/env bash
# GPU acceptance run (under 9 minutes on one H200): the project's sampler vs transformers'
# generate, and the trainer's update at micro-batches 1/4/16, with gradient checkpointing and
# with LoRA, on a randomly initialised model of Qwen2.5-1.5B's shape and vocabulary in bf16.
# Needs torch, transformers and peft only (no vLLM, TRL or datasets; nothing is downloaded).
#
#   bash scripts/gpu_accept.sh                   # on the GPU machine; the JSON lands in $OUT or runs/
#   DEVICE=cpu SHAPE=tiny PROMPTS=2 GROUP=2 PROMPT_TOKENS=8 NEW_TOKENS=8 MICRO=1,2 bash scripts/gpu_accept.sh
#
# BEFORE=FILE adds the update with an earlier loss module (git show 1e2f708:training/loss.py > FILE).
# The last line printed is the JSON of every figure (also written to $OUT/gpu_accept.json).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
OUT=${OUT:-runs/gpu-accept}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >&2 2>/dev/null || true
"$PY" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'transformers', transformers.__version__)" >&2
exec env PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" TOKENIZERS_PARALLELISM=false "$PY" scripts/gpu_accept.py \
    --shape "${SHAPE:-qwen2.5-1.5b}" ${DEVICE:+--device "$DEVICE"} --prompts "${PROMPTS:-16}" --group "${GROUP:-8}" \
    --prompt-tokens "${PROMPT_TOKENS:-128}" --new-tokens "${NEW_TOKENS:-256}" --micro-batches "${MICRO:-1,4,16}" \
    --out "$OUT/gpu_accept.json" ${BEFORE:+--before "$BEFORE"}
