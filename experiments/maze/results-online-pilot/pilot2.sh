#!/usr/bin/env bash
# issue 34 pilot, second round (the merged search signal: failures floor, duplicates penalty, idle stop), from commit 75e1836 in /work/exp34b
cd /work/exp34b
common="--task maze-clusters --start local:maze-clusters-warmup --mazes 10 --seeds 2 --programs 240 --instance-seed 1717"
case $1 in
  a) PYTHONPATH=/work/exp34b OMP_NUM_THREADS=1 nice -n 5 python3 examples/maze/online_pilot.py $common --arm frozen= --arm vpoa-new=vpo_archive --out /work/runs34/pilot2-a ;;
  b) PYTHONPATH=/work/exp34b OMP_NUM_THREADS=1 nice -n 5 python3 examples/maze/online_pilot.py $common --arm vpoa-new-noidle=vpo_archive:idle_steps=0 --arm vpoa-old-rules=vpo_archive:duplicates=\"zero\",failures=\"zero\",idle_steps=0 --out /work/runs34/pilot2-b ;;
esac
