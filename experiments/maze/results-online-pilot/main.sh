#!/usr/bin/env bash
# issue 34 main runs, from commit 31515ef in /work/exp34c (two one-thread lanes: a = instance seed 2929, b = 3838)
set -euo pipefail
cd /work/exp34c
common="--task maze-clusters --start local:maze-clusters-warmup --mazes 34 --seeds 2 --programs 240 --arm frozen= --arm vpoa=vpo_archive --arm grpo=grpo"
case $1 in
  a) PYTHONPATH=/work/exp34c OMP_NUM_THREADS=1 nice -n 5 python3 examples/maze/online_pilot.py $common --instance-seed 2929 --out /work/runs34/main-s2929 ;;
  b) PYTHONPATH=/work/exp34c OMP_NUM_THREADS=1 nice -n 5 python3 examples/maze/online_pilot.py $common --instance-seed 3838 --out /work/runs34/main-s3838 ;;
esac
