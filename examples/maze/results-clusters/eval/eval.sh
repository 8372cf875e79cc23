#!/usr/bin/env bash
# one evaluation file per model: [ANSWERS=m] eval.sh NAME=DIR:MODE ...  (seed 2026, 200 mazes, maze-clusters; sets of m = 3 unless ANSWERS)
cd /work/main
for m in "$@"; do
  name=${m%%=*}
  out=/work/eval24/$name.json
  [ -f "$out" ] && continue
  OMP_NUM_THREADS=1 PYTHONPATH=/work/main python3 examples/maze/evaluate.py --model "$m" --task maze-clusters --tokens-per-route 64 --answers ${ANSWERS:-3} --mazes 200 --maze-seed 2026 --completions /work/eval24/completions --out "$out" >> /work/eval24/$name.log 2>&1 || echo "failed $name"
done
