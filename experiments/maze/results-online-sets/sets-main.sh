#!/usr/bin/env bash
# issue 34 item 3, set protocol MAIN runs: from commit 54727a0 in /work/exp34g; instance seeds 8181 (lane a) and 9292
# (lane b), never used; 24 hard mazes x 2 run seeds each = 96 paired runs pooled (the pilot's power calculation: ~75 for
# +0.10 at 80%). Arms, settings and counts fixed before any run, from the pilot (sets-pilot.sh, seed 4343).
set -euo pipefail
cd /work/exp34g
case $1 in a) seed=8181 ;; b) seed=9292 ;; esac
PYTHONPATH=/work/exp34g OMP_NUM_THREADS=1 nice -n 5 python3 examples/maze/online_pilot.py --task maze-clusters \
  --start local:maze-clusters-vpo --answers 0 --mazes 24 --seeds 2 --programs 240 --instance-seed $seed \
  --arm frozen= --arm vpo=vpo:lr=2e-4 --arm vpoa-lr2e-4=vpo_archive:lr=2e-4 \
  --arm first=first+vpo_archive:steps=4,prompts=4,group=4,answers=3 \
  --arm grpo1=grpo:lr=2e-4,answers=1,start=local:maze-clusters-grpo --arm grpo1-frozen=:answers=1,start=local:maze-clusters-grpo \
  --out /work/runs34/sets-main-s$seed
