#!/usr/bin/env bash
# RL lanes on symreg from one warm-up, one torch thread per lane, two lanes side by side, from a fixed
# commit in a git worktree (the budget below was fixed before any RL run; protocol.md):
#   git worktree add /work/exp45rl COMMIT && cd /work/exp45rl && RUNS=/work/runs45 PYTHONPATH=$PWD OMP_NUM_THREADS=1 \
#       nohup bash experiments/symreg/train.sh a c e g &
# Resumable: a run directory with trainer_state.pt continues with `evo train --out DIR --resume --steps N`,
# which is what a lane does when its directory exists.
set -euo pipefail
RUNS=${RUNS:-/tmp/symreg}
WARMUP=${WARMUP:-$RUNS/warmup}
STEPS=400
common="--task symreg --init $WARMUP --prompts 8 --group 8 --answers 3 --lr 1e-4 --kl-coef 0 --temperature 1.0 --save-every 25 --snapshot-every 100 --threads 1 --no-progress"
train() {  # name algo tokens seed
  local name=$1 algo=$2 tokens=$3 seed=$4
  local out=$RUNS/$name
  if [ -f "$out/trainer_state.pt" ]; then
    python -m evo train --out "$out" --resume --steps "$STEPS" --threads 1 --no-progress >> "$out.log" 2>&1
  else
    python -m evo train $common --algo "$algo" --steps "$STEPS" --max-new-tokens "$tokens" --seed "$seed" --out "$out" >> "$out.log" 2>&1
  fi
}
# tokens: 1.5x the longest of 64 demonstrations + 1, rounded up to 8 (trainer.token_budget): one expression 88, three 200
if [ $# -gt 1 ]; then for lane in "$@"; do bash "$0" "$lane" || echo "train.sh: lane $lane failed" >&2; done; exit; fi
case $1 in
  a) train grpo-s0 grpo 88 0 ;;
  b) train vpo-s0 vpo 200 0 ;;
  c) train grpo-s1 grpo 88 1 ;;
  d) train vpo-s1 vpo 200 1 ;;
  e) train grpo-s2 grpo 88 2 ;;
  f) train vpo-s2 vpo 200 2 ;;
  g) train multirlvr-s0 multi_rlvr 200 0 ;;
  h) train multirlvr-s1 multi_rlvr 200 1 ;;
  i) train multirlvr-s2 multi_rlvr 200 2 ;;
  *) echo "train.sh: unknown lane $1" >&2; exit 2 ;;
esac
