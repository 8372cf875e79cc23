#!/usr/bin/env bash
# The set-search protocol of issue 33 on one instance seed: search.sh INSTANCE_SEED NAME [MAZES]
# (64 hard mazes x 2 run seeds x 240 programs for each of the six arms; RUNS=/work/runs33 by default).
set -euo pipefail
cd "$(dirname "$0")/../../.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=$PWD
RUNS=${RUNS:-/work/runs33}
S=experiments/maze/results-clusters/states
python3 -m evo compare --task maze-clusters \
  --policy grpo=local:maze-clusters-grpo \
  --policy warmup=local:maze-clusters-warmup --policy warmup3=local:maze-clusters-warmup \
  --policy multirlvr=local:$S/multirlvr-s0 \
  --policy vpo=local:maze-clusters-vpo --policy vpo1=local:maze-clusters-vpo \
  --answers warmup3=3 --answers vpo1=1 \
  --instances 2 --pool 30 --tokens-per-answer 64 --temperature 1.0 \
  --search-instances "${3:-64}" --search-seeds 2 --search-programs 240 --search-pool 30 \
  --search-instance-seed "$1" --out "$RUNS/$2" --quiet > "$RUNS/$2.log" 2>&1
