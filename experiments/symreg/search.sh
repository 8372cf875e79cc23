#!/usr/bin/env bash
# The symreg set-search protocol (protocol.md) on one instance seed: search.sh INSTANCE_SEED NAME [INSTANCES [EXTRA ARMS...]]
# Every arm is searched as it was trained, 120 programs a run (PROGRAMS=N: the budget follow-up's 480), 2 run seeds;
# RUNS=/work/runs45 by default.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=$PWD
RUNS=${RUNS:-/work/runs45}
seed=$1 name=$2 instances=${3:-8}
shift $(( $# < 3 ? $# : 3 ))
python3 -m evo compare --task symreg \
  --policy grpo=local:symreg-grpo --policy warmup=local:symreg-warmup --policy warmup3=local:symreg-warmup \
  --policy vpo=local:symreg-vpo --answers warmup3=3 "$@" \
  --instances 2 --pool 30 --tokens-per-answer 96 --temperature 1.0 \
  --search-instances "$instances" --search-seeds 2 --search-programs "${PROGRAMS:-120}" --search-pool 30 --search-hard-below 0.9 \
  --search-instance-seed "$seed" --out "$RUNS/$name" --quiet > "$RUNS/$name.log" 2>&1
