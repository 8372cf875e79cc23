#!/usr/bin/env bash
# issue 34 item 3, the ablation's missing knobs (a pilot, fixed before running): larger steps (every 8 iterations per
# PPO step), the duplicate rule (penalty = default, zero, score) and the lr, on the model where online training helped in
# sets-main (maze-clusters-grpo, single routes); and larger steps for the set model. From commit 65e1005 in /work/exp34h;
# instance seeds 5151 (lane a) and 6262 (lane b), never used; 8 hard mazes x 2 run seeds each = 32 paired runs.
set -euo pipefail
cd /work/exp34h
case $1 in a) seed=5151 ;; b) seed=6262 ;; esac
G=start=local:maze-clusters-grpo,answers=1
PYTHONPATH=/work/exp34h OMP_NUM_THREADS=1 nice -n 5 python3 examples/maze/online_pilot.py --task maze-clusters \
  --start local:maze-clusters-vpo --answers 0 --mazes 8 --seeds 2 --programs 240 --instance-seed $seed \
  --arm grpo1-frozen=:$G --arm grpo1=grpo:lr=2e-4,$G --arm grpo1-dupzero=grpo:lr=2e-4,duplicates='"zero"',$G \
  --arm grpo1-dupscore=grpo:lr=2e-4,duplicates='"score"',$G --arm grpo1-every8=grpo:lr=2e-4,every=8,$G \
  --arm grpo1-default=grpo:$G --arm frozen= --arm vpo-every8=vpo:lr=2e-4,every=8 \
  --out /work/runs34/ablation-s$seed
