#!/usr/bin/env bash
# RL lanes on maze-clusters from the committed warm-up (evo/checkpoints/maze-clusters-warmup; commands.txt names its old copy, examples/maze/results-clusters/warmup, the same weights), one torch
# thread per lane, two lanes side by side, run from a fixed commit in a git worktree:
#   git worktree add /work/exp24 COMMIT && cd /work/exp24 && RUNS=/work/runs24 PYTHONPATH=$PWD OMP_NUM_THREADS=1 nohup bash examples/maze/results-clusters/train.sh a &
# Resumable: a run directory with trainer_state.pt continues with `evo train --out DIR --resume --steps N`, which is
# what a lane does when its directory exists (the tree keeps no resumable state: commit 16eaec0 holds the
# step-600 states of grpo-s0, vpo-s0 and grpo-darling-s0; check one out, copy it to $RUNS/NAME and run its lane).
set -euo pipefail
RUNS=${RUNS:-/tmp/maze-clusters}
WARMUP=evo/checkpoints/maze-clusters-warmup
common="--task maze-clusters --init $WARMUP --prompts 8 --group 8 --answers 3 --lr 1e-4 --kl-coef 0 --temperature 1.0 --save-every 25 --snapshot-every 100 --threads 1 --no-progress"
train() {  # name algo steps max_new_tokens seed [extra...]
  local name=$1 algo=$2 steps=$3 tokens=$4 seed=$5; shift 5
  local out=$RUNS/$name
  if [ -f "$out/trainer_state.pt" ]; then
    python -m evo train --out "$out" --resume --steps "$steps" --threads 1 --no-progress >> "$out.log" 2>&1
  else
    python -m evo train $common --algo "$algo" --steps "$steps" --max-new-tokens "$tokens" --seed "$seed" --out "$out" "$@" >> "$out.log" 2>&1
  fi
}
# 64 tokens per route (a 15-move route with notes is 63 characters; budgets are 6-13 moves): GRPO 68, VPO (m = 3) 196
# several lanes one after another: train.sh b1 a1 d1 e
if [ $# -gt 1 ]; then for lane in "$@"; do bash "$0" "$lane" || echo "train.sh: lane $lane failed" >&2; done; exit; fi
case $1 in
  a) train grpo-s0 grpo 600 68 0 ;;
  b) train vpo-s0 vpo 600 196 0 ;;
  c) train vpo2-s0 vpo 600 132 0 --answers 2 ;;
  d) train grpo-darling-s0 grpo 600 68 0 --diversity-coef 1.0 ;;
  # seeds 1 and 2 of GRPO, VPO (m = 3) and DARLING-style
  a1) train grpo-s1 grpo 600 68 1 ;;
  a2) train grpo-s2 grpo 600 68 2 ;;
  b1) train vpo-s1 vpo 600 196 1 ;;
  b2) train vpo-s2 vpo 600 196 2 ;;
  d1) train grpo-darling-s1 grpo 600 68 1 --diversity-coef 1.0 ;;
  d2) train grpo-darling-s2 grpo 600 68 2 --diversity-coef 1.0 ;;
  e) train multirlvr-s0 multi_rlvr 600 196 0 ;;
  e1) train multirlvr-s1 multi_rlvr 600 196 1 ;;
  e2) train multirlvr-s2 multi_rlvr 600 196 2 ;;
  f) train rwgrpo-s0 random_weight_grpo 600 68 0 ;;
  g) train maxk-s0 maxk 600 68 0 ;;
  h) train grpo-cliphigh-s0 grpo 600 68 0 --eps-high 0.28 ;;  # (one on-policy update per step: the clip cannot bind; the same run as a)
  # clip-higher where the clip binds: two PPO epochs per step (the second is off-policy), and GRPO with two epochs as its control
  h2) train grpo-cliphigh-e2-s0 grpo 600 68 0 --eps-high 0.28 --ppo-epochs 2 ;;
  a3) train grpo-e2-s0 grpo 600 68 0 --ppo-epochs 2 ;;
  *) echo "train.sh: unknown lane '$1' (a b c d e e1 e2 f g h h2 a3 a1 a2 b1 b2 d1 d2)" >&2; exit 2 ;;
esac
