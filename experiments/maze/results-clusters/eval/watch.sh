#!/usr/bin/env bash
# evaluate each run once it has finished 600 steps: watch.sh NAME:MODE ...
pending=("$@")
while [ ${#pending[@]} -gt 0 ]; do
  rest=()
  for spec in "${pending[@]}"; do
    name=${spec%%:*}; mode=${spec##*:}; dir=/work/runs24/$name
    if [ -d "$dir/steps/000600" ] && ! pgrep -f -- "--out $dir( |$)" >/dev/null && ! pgrep -f -- "--out $dir --resume" > /dev/null; then
      /work/eval24/eval.sh "$name=$dir:$mode"
    else
      rest+=("$spec")
    fi
  done
  pending=("${rest[@]}")
  [ ${#pending[@]} -gt 0 ] && sleep 30
done
