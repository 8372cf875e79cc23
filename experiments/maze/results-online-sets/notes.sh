#!/usr/bin/env bash
# issue 34 item 4: maze-notes at the new default of evo run --train (lr = a tenth of the offline rate), from commit 1f7a257 in /work/exp34d
set -euo pipefail
cd /work/exp34d
common="--task maze-notes --start local:maze-notes-warmup --mazes 24 --seeds 2 --programs 400 --arm frozen= --arm vpoa=vpo_archive"
case $1 in
  a) PYTHONPATH=/work/exp34d OMP_NUM_THREADS=1 nice -n 10 python3 examples/maze/online_pilot.py $common --instance-seed 4646 --out /work/runs34/notes-s4646 ;;
  b) PYTHONPATH=/work/exp34d OMP_NUM_THREADS=1 nice -n 10 python3 examples/maze/online_pilot.py $common --instance-seed 5757 --out /work/runs34/notes-s5757 ;;
esac
