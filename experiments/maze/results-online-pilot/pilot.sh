#!/usr/bin/env bash
# issue 34 pilot, from commit fbb228a in /work/exp34 (two one-thread lanes)
cd /work/exp34
common="--task maze-clusters --start local:maze-clusters-warmup --mazes 10 --seeds 2 --programs 240 --instance-seed 1717"
case $1 in
  a) PYTHONPATH=/work/exp34 OMP_NUM_THREADS=1 nice -n 5 python3 examples/maze/online_pilot.py $common --arm frozen= --arm vpoa=vpo_archive --arm vpoa-lr2e-5=vpo_archive:lr=2e-5 --out /work/runs34/pilot-a ;;
  b) PYTHONPATH=/work/exp34 OMP_NUM_THREADS=1 nice -n 5 python3 examples/maze/online_pilot.py $common --arm grpo=grpo --arm vpoa-lr2e-5-kl=vpo_archive:lr=2e-5,kl_coef=0.05 --arm grpo-lr2e-5=grpo:lr=2e-5 --out /work/runs34/pilot-b ;;
esac
