#!/usr/bin/env bash
# GPU acceptance run (under 9 minutes on one H200): the project's sampler vs transformers'
# generate, and the trainer's update at micro-batches 1/4/16, with gradient checkpointing and
# with LoRA, on a randomly initialised model of Qwen2.5-1.5B's shape and vocabulary in bf16.
# Then the learning stage: a fresh 5M-parameter Qwen2-layout model warmed up for 500 steps on the
# maze's demonstrations, fp32 masters + bf16 autocast; exits 1 unless its held-out mean reward rises
# by more than LEARN_MARGIN (0.03). Then (scripts/gpu_checks.py) the memory plan at Qwen2.5-3B's
# shape, predicted vs measured with the optimizer step (MEMORY_SHAPE, MEMORY_ROWS, MEMORY_PROMPT,
# MEMORY_COMPLETION); `evo run --train` from a bf16 checkpoint moving every weight tensor; the
# export chain (bf16 on disk, --init of it plans as the original). STAGES=speed,... picks stages.
# Needs torch, transformers and peft only (no vLLM, TRL or datasets; nothing is downloaded).
#
#   bash scripts/gpu_accept.sh                   # on the GPU machine; the JSON lands in $OUT or runs/
#   DEVICE=cpu SHAPE=tiny PROMPTS=2 GROUP=2 PROMPT_TOKENS=8 NEW_TOKENS=8 MICRO=1,2 STAGES=speed bash scripts/gpu_accept.sh
#   DEVICE=cpu STAGES=learn LEARN_SIZE=nano LEARN_STEPS=300 LEARN_BATCH=24 LEARN_INSTANCES=16 bash scripts/gpu_accept.sh
#
# BEFORE=FILE adds the update with a baseline loss module, the full float32 log-softmax
# (git show 1e2f708:training/loss.py > FILE).
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
    --out "$OUT/gpu_accept.json" ${BEFORE:+--before "$BEFORE"} --stages "${STAGES:-speed,learn,memory,online,export}" \
    ${MEMORY_SHAPE:+--memory-shape "$MEMORY_SHAPE"} ${MEMORY_ROWS:+--memory-rows "$MEMORY_ROWS"} \
    ${MEMORY_PROMPT:+--memory-prompt "$MEMORY_PROMPT"} ${MEMORY_COMPLETION:+--memory-completion "$MEMORY_COMPLETION"} \
    ${LEARN_TASK:+--learn-task "$LEARN_TASK"} ${LEARN_SIZE:+--learn-size "$LEARN_SIZE"} \
    ${LEARN_STEPS:+--learn-steps "$LEARN_STEPS"} ${LEARN_BATCH:+--learn-batch-size "$LEARN_BATCH"} \
    ${LEARN_POOL:+--learn-pool "$LEARN_POOL"} ${LEARN_INSTANCES:+--learn-instances "$LEARN_INSTANCES"} \
    ${LEARN_SEED:+--learn-seed "$LEARN_SEED"} ${LEARN_MARGIN:+--learn-margin "$LEARN_MARGIN"}
