#!/usr/bin/env bash
# The long GRPO-vs-VPO runs on maze-notes, from the shipped maze-notes warm-up, as they were
# run (session of 3 Dec 2026, from commit 075103a in a git worktree, one torch thread per lane):
#   git worktree add /work/exp15 075103a && cd /work/exp15 && RUNS=/work/runs15 bash PATH/TO/train.sh a   # and b
# Resumable: a run directory with trainer_state.pt continues with --resume. results-long/runs/
# keeps each run's train_config.json and metrics.jsonl.gz; the weights and resumable states
# (vpo-s0, grpo-s0, rwgrpo-s0, multirlvr-s0, grpo-darling-s0) are in commit 16eaec0's tree:
# `git checkout 16eaec0 -- examples/maze/results-long/runs/vpo-s0` brings one back.
set -euo pipefail
RUNS=${RUNS:-/tmp/maze-long}
WARMUP=evo/checkpoints/maze-notes-warmup
common="--task maze-notes --init $WARMUP --prompts 8 --group 8 --answers 3 --lr 1e-4 --kl-coef 0 --temperature 1.0 --save-every 25 --snapshot-every 100 --threads 1 --no-progress"
train() {  # name algo steps max_new_tokens seed [extra...]
  local name=$1 algo=$2 steps=$3 tokens=$4 seed=$5; shift 5
  local out=$RUNS/$name
  if [ -f "$out/trainer_state.pt" ]; then
    python -m evo train --out "$out" --resume --steps "$steps" --threads 1 --no-progress >> "$out.log" 2>&1
  else
    python -m evo train $common --algo "$algo" --steps "$steps" --max-new-tokens "$tokens" --seed "$seed" --out "$out" "$@" >> "$out.log" 2>&1
  fi
}
case $1 in
  a) train vpo-s0 vpo 1000 292 0 ;;
  b) train grpo-s0 grpo 3000 100 0 ;;
  # second sitting (session of 3 Dec 2026, evening): the equal-tokens GRPO and the ablation
  c) train grpo-s0 grpo 1625 100 0            # 1600 steps = 6.21M completion tokens ~ VPO@600's 6.26M
     train rwgrpo-s0 random_weight_grpo 600 100 0
     train grpo-s0 grpo 2200 100 0 ;;         # ~ VPO@800's 8.45M tokens
  d) train multirlvr-s0 multi_rlvr 600 292 0 ;;
  # third sitting (session of 4 Dec 2026; worktree at bf154de, whose trainer reproduces the seed-0
  # GRPO run's first steps bit for bit): seeds 1-2 and the trainer-option ablation rows, as run
  # (lane f was stopped after its entropy run and lane i ran beside g and h; clip-higher, lane j,
  # was started beside them and stopped at step ~30 for lack of time: not run)
  e) train vpo-s1 vpo 600 292 1 ;;
  f) train grpo-s1 grpo 600 100 1
     train grpo-darling-s0 grpo 600 100 0 --diversity-coef 1.0      # DARLING-style: r * (1 + div)
     train grpo-entropy-s0 grpo 600 100 0 --entropy-coef 0.01 ;;    # entropy bonus in the loss
  g) train vpo-s2 vpo 600 292 2 ;;                                  # after lane e
  h) train grpo-s2 grpo 600 100 2                                   # after lane f
     train maxk-s0 maxk 600 100 0 ;;                                # Max@K (PKPO, k = G/2)
  i) train goalgrpo-s0 goal_grpo 600 100 0 ;;                       # goal-conditioned GRPO
  j) train grpo-cliphigh-s0 grpo 600 100 0 --eps-high 0.28 ;;      # clip-higher (DAPO's 0.28): not run
esac
