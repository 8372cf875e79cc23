#!/usr/bin/env bash
# issue 34 item 3: main runs of the ablation pilot's best arm (online group vpo, lr 2e-4, one PPO step every 8
# iterations: +0.062 [+0.000, +0.156] on 32 pilot runs), fixed before running. Power from that pilot: paired sd 0.246
# -> 132 paired runs for +0.06 at 80%; here 144. From commit 01b22ba in /work/exp34i; never-used instance seeds 3131
# (lane a) and 5353 (lane b), 36 hard mazes x 2 run seeds each.
set -euo pipefail
cd /work/exp34i
case $1 in a) seed=3131 ;; b) seed=5353 ;; esac
PYTHONPATH=/work/exp34i OMP_NUM_THREADS=1 nice -n 5 python3 examples/maze/online_pilot.py --task maze-clusters \
  --start local:maze-clusters-vpo --answers 0 --mazes 36 --seeds 2 --programs 240 --instance-seed $seed \
  --arm frozen= --arm vpo-every8=vpo:lr=2e-4,every=8 \
  --out /work/runs34/every8-s$seed
