#!/usr/bin/env bash
# issue 34 item 3, set protocol pilot: from commit ff2d766 in /work/exp34e; instance seed 4343 (never used), 10 hard mazes x 2 run seeds
set -euo pipefail
cd /work/exp34e
PYTHONPATH=/work/exp34e OMP_NUM_THREADS=1 nice -n 5 python3 examples/maze/online_pilot.py --task maze-clusters \
  --start local:maze-clusters-vpo --answers 0 --mazes 10 --seeds 2 --programs 240 --instance-seed 4343 \
  --arm frozen= --arm vpoa=vpo_archive --arm vpoa-lr2e-4=vpo_archive:lr=2e-4 --arm vpoa-e1=vpo_archive:lr=1e-4,every=1 \
  --arm vpoa-kl=vpo_archive:lr=2e-4,every=2,kl_coef=0.05 --arm vpo=vpo:lr=2e-4 \
  --arm first=first+vpo_archive:steps=4,prompts=4,group=4,answers=3 \
  --arm grpo1=grpo:lr=2e-4,answers=1,start=local:maze-clusters-grpo --arm grpo1-frozen=:answers=1,start=local:maze-clusters-grpo \
  --out /work/runs34/sets-pilot
