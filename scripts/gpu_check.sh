#!/usr/bin/env bash
# GPU recipe (under 10 minutes on one GPU): build a ~25M-parameter model, warm it up on 9x9
# mazes (maze-chat), then run N VPO steps three ways and print seconds per step and
# completion tokens/s for each:
#   1. the project's trainer, local rollouts (--rollouts local)
#   2. the project's trainer, vLLM rollouts   (--rollouts vllm, weights synced every step)
#   3. TRL's GRPOTrainer                       (--engine trl [--use-vllm])
#
#   bash scripts/gpu_check.sh                    # on a GPU machine with vllm and trl installed
#   SIZE=nano WARMUP_STEPS=2 POOL=16 STEPS=1 PROMPTS=2 GROUP=2 TOKENS=16 DEVICE=cpu TRL_VLLM=0 \
#     VLLM_PY=.venv-vllm/bin/python bash scripts/gpu_check.sh    # the CPU smoke test (tests/test_gpu_check.py)
#
# The warm-up is `evo pretrain` (CPU threads: it is short); the RL steps run on DEVICE.
# The last line is JSON with the three paths' medians.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python}
VLLM_PY=${VLLM_PY:-$PY}            # the interpreter with vLLM (the same one on a GPU machine)
SIZE=${SIZE:-small}
WARMUP_STEPS=${WARMUP_STEPS:-400}
POOL=${POOL:-2000}                   # warm-up training mazes (generating them takes a while)
STEPS=${STEPS:-10}
PROMPTS=${PROMPTS:-16}
GROUP=${GROUP:-8}
TOKENS=${TOKENS:-240}               # 3 routes of a 9x9 maze
DEVICE=${DEVICE:-cuda}
TRL_VLLM=${TRL_VLLM:-1}             # 1: --engine trl --use-vllm (colocate); 0: TRL samples with transformers
OUT=${OUT:-runs/gpu-check}
THREADS=${THREADS:-$(nproc)}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" TOKENIZERS_PARALLELISM=false VLLM_LOGGING_LEVEL=${VLLM_LOGGING_LEVEL:-WARNING}
[ "$DEVICE" = cpu ] && export VLLM_TARGET_DEVICE=cpu

rm -rf "$OUT"
mkdir -p "$OUT"
echo "== warm-up: $SIZE model, $WARMUP_STEPS steps on maze-chat (9x9)" >&2
"$PY" -m evo pretrain --task maze-chat --size "$SIZE" --arch llama --steps "$WARMUP_STEPS" --pool "$POOL" --threads "$THREADS" \
    --eval-instances 0 --no-half --out "$OUT/warmup" > "$OUT/warmup.log" 2>&1

common=(--task maze-chat --algo vpo --init "$OUT/warmup" --steps "$STEPS" --prompts "$PROMPTS" --group "$GROUP"
        --max-new-tokens "$TOKENS" --save-every "$STEPS" --device "$DEVICE" --threads "$THREADS" --no-progress)
vllm_options=()
[ "$DEVICE" = cpu ] && vllm_options=(--vllm-option kv_cache_memory_bytes=268435456)
trl_flags=()
[ "$TRL_VLLM" = 1 ] && trl_flags=(--use-vllm)

echo "== 1/3 --rollouts local" >&2
"$PY" -m evo train "${common[@]}" --out "$OUT/local" > "$OUT/local.log" 2>&1
echo "== 2/3 --rollouts vllm" >&2
"$VLLM_PY" -m evo train "${common[@]}" --rollouts vllm "${vllm_options[@]}" --out "$OUT/vllm" > "$OUT/vllm.log" 2>&1
echo "== 3/3 --engine trl ${trl_flags[*]}" >&2
"$PY" -m evo train "${common[@]}" --engine trl "${trl_flags[@]}" --out "$OUT/trl" > "$OUT/trl.log" 2>&1

"$PY" - "$OUT" <<'EOF'
import json, statistics, sys
from pathlib import Path

out, figures = Path(sys.argv[1]), {"name": "gpu_check"}
for path in ("local", "vllm", "trl"):
    records = [json.loads(line) for line in (out / path / "metrics.jsonl").read_text().splitlines()]
    timed = records[1:] or records  # the first step compiles and warms caches
    seconds = statistics.median(r["seconds"] for r in timed)
    rate = statistics.median(r["tokens_per_s"] for r in timed)
    extra = f", logprob gap {statistics.mean(r['logprob_gap'] for r in records):.1e}" if path == "vllm" else ""
    print(f"{path:5s}: {seconds:.2f} s/step, {rate:.0f} completion tokens/s ({len(records)} steps{extra})")
    figures[f"{path}_s_per_step"], figures[f"{path}_tokens_per_s"] = round(seconds, 3), round(rate, 1)
print(json.dumps(figures))
EOF
