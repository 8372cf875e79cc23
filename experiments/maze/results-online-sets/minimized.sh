#!/usr/bin/env bash
# issue 34 figure "minimized objectives": failed share under online training vs frozen on the maze's minimized spec
# (objectives = shares left behind, bad routes fail); from commit 762900a in /work/exp34f; instance seeds 6464 (lane a)
# and 7575 (lane b), never used; 8 hard mazes x 2 run seeds each (cut from 12 for the session's time, before any run)
set -euo pipefail
cd /work/exp34f
case $1 in a) seed=6464 ;; b) seed=7575 ;; esac
PYTHONPATH=/work/exp34f OMP_NUM_THREADS=1 nice -n 5 python3 examples/maze/online_pilot.py --task maze-clusters --minimized \
  --start local:maze-clusters-warmup --mazes 8 --seeds 2 --programs 240 --instance-seed $seed \
  --arm frozen= --arm vpoa=vpo_archive --arm grpo=grpo --arm grpo-lr2e-4=grpo:lr=2e-4 --arm grpo-lr2e-4-zero=grpo:lr=2e-4,failures='"zero"' \
  --out /work/runs34/minimized-s$seed
