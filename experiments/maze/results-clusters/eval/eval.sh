#!/usr/bin/env bash
# one evaluation file per model: [SEED=s PREFIX=p ANSWERS=m] eval.sh NAME=DIR:MODE ...
# (maze-clusters, 200 mazes of seed 2026 and sets of m = 3 unless SEED / ANSWERS; PREFIX names a re-measure's files)
cd /work/main
for m in "$@"; do
  name=${m%%=*}
  out=/work/eval24/${PREFIX:-}$name.json
  [ -f "$out" ] && continue
  OMP_NUM_THREADS=1 PYTHONPATH=/work/main python3 examples/maze/evaluate.py --model "$m" --task maze-clusters --tokens-per-route 64 --answers ${ANSWERS:-3} --mazes 200 --maze-seed ${SEED:-2026} --completions /work/eval24/completions${PREFIX:+-$SEED} --out "$out" >> /work/eval24/${PREFIX:-}$name.log 2>&1 || echo "failed $name"
done
