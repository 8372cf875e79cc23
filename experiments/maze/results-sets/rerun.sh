#!/usr/bin/env bash
# The set-search protocol again (search.sh beside this), for the rows the first main runs did not record:
# success at equal distinct evaluations (`distinct` in every record now) and a GRPO arm from its best
# held-out checkpoint (step 400 of 600 on the curves' mazes: `git show 16eaec0:examples/maze/results-clusters/
# states/grpo-s0/steps/000400/FILE` for each file into GRPO400). rerun.sh INSTANCE_SEED NAME GRPO400 [MAZES]
set -euo pipefail
cd "$(dirname "$0")/../../.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 PYTHONPATH=$PWD
RUNS=${RUNS:-/work/runs45}
python3 -m evo compare --task maze-clusters \
  --policy grpo=local:maze-clusters-grpo --policy grpo-best=local:"$3" --policy vpo=local:maze-clusters-vpo \
  --answers grpo-best=1 \
  --instances 2 --pool 30 --tokens-per-answer 64 --temperature 1.0 \
  --search-instances "${4:-64}" --search-seeds 2 --search-programs 240 --search-pool 30 \
  --search-instance-seed "$1" --out "$RUNS/$2" --quiet > "$RUNS/$2.log" 2>&1
