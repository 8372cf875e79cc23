#!/usr/bin/env bash
# The maze GRPO-vs-VPO experiment: RL from one warm-up checkpoint, same steps and G, a few
# seeds per algorithm, then evaluation on held-out mazes with matched candidate pools
# (GRPO 30 samples vs VPO 10 rollouts x 3 answers) and the table with paired bootstrap CIs.
#
#   WARMUP=evo/checkpoints/maze-warmup STEPS=150 SEEDS="0 1 2" bash experiments/maze/run.sh
#
# Training runs go to $RUNS (default /tmp/maze-runs), two lanes in parallel (GRPO, VPO),
# one torch thread each; results (eval JSON, table .md/.json, commands) to $RESULTS.
set -euo pipefail
cd "$(dirname "$0")/../.."
TASK=${TASK:-maze}
TOKENS=${TOKENS:-64}  # per route: 64 for maze, 96 for maze-notes (a 21-move route with notes is 87 characters)
WARMUP=${WARMUP:-evo/checkpoints/maze-warmup}
STEPS=${STEPS:-150}
SEEDS=${SEEDS:-"0 1 2"}
PROMPTS=${PROMPTS:-8}
GROUP=${GROUP:-8}
LR=${LR:-1e-4}
KL=${KL:-0}
MAZES=${MAZES:-200}
ALGOS=${ALGOS:-"grpo vpo"}
RUNS=${RUNS:-/tmp/maze-runs}
RESULTS=${RESULTS:-experiments/maze/results}
mkdir -p "$RUNS" "$RESULTS"
COMMANDS="$RESULTS/commands.txt"
: > "$COMMANDS"

prompt_of() {  # algo -> the prompt it trains on: single, set or goal (the estimator registry says)
  python -m evo train --list-algos | awk -v a="$1" '$1 == a { print $2 }'
}

train() {  # algo seed
  local algo=$1 seed=$2 m=1
  if [ "$(prompt_of "$algo")" = set ]; then m=3; fi
  local cmd="python -m evo train --task $TASK --algo $algo --init $WARMUP --out $RUNS/$algo-s$seed --steps $STEPS --prompts $PROMPTS --group $GROUP --answers 3 --max-new-tokens $((TOKENS * m + 4)) --lr $LR --kl-coef $KL --seed $seed --save-every 25 --no-progress"
  echo "$cmd" >> "$COMMANDS"
  if [ -f "$RUNS/$algo-s$seed/trainer_state.pt" ]; then
    python -m evo train --out "$RUNS/$algo-s$seed" --resume --steps "$STEPS" --no-progress >> "$RUNS/$algo-s$seed.log" 2>&1
  else
    $cmd >> "$RUNS/$algo-s$seed.log" 2>&1
  fi
}

lane() {  # algo: all seeds in sequence
  for seed in $SEEDS; do train "$1" "$seed"; done
}

for algo in $ALGOS; do lane "$algo" & done
wait

models=(--model "warmup-single=$WARMUP:single" --model "warmup-set=$WARMUP:set")
for algo in $ALGOS; do
  mode=$(prompt_of "$algo")
  for seed in $SEEDS; do models+=(--model "$algo-s$seed=$RUNS/$algo-s$seed:$mode"); done
done
echo "python experiments/maze/evaluate.py ${models[*]} --task $TASK --tokens-per-route $TOKENS --mazes $MAZES --out $RESULTS/eval.json" >> "$COMMANDS"
python experiments/maze/evaluate.py "${models[@]}" --task "$TASK" --tokens-per-route "$TOKENS" --mazes "$MAZES" --out "$RESULTS/eval.json"
echo "python experiments/maze/table.py $RESULTS/eval.json --commands $COMMANDS --out $RESULTS/table" >> "$COMMANDS"
python experiments/maze/table.py "$RESULTS/eval.json" --commands "$COMMANDS" --out "$RESULTS/table"
