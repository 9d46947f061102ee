#!/usr/bin/env bash
# Part `curves` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# learning parity (bench/parity_curves.py): both sides from the same weights on the same batches,
# CURVE_SEEDS (default "0 1 2 3 4") for CURVE_STEPS (default 750), scored by the same evaluator; curves.json and curves.svg
note "== learning parity (bench/parity_curves.py, seeds ${CURVE_SEEDS:=0 1 2 3 4})"
start=$(date +%s)
rm -rf /tmp/parity-curves
# Seeds train side by side: 3 CPU threads each keeps 5 of them from fighting over the 16 cores. Bounded by
# CURVES_TIMEOUT seconds so that a stuck seed cannot hold the machine.
# shellcheck disable=SC2086
OMP_NUM_THREADS=3 PYTHONUNBUFFERED=1 timeout "${CURVES_TIMEOUT:-480}" python3 bench/parity_curves.py --build build/gpu \
  --out /tmp/parity-curves --seeds $CURVE_SEEDS --steps "${CURVE_STEPS:-750}" >"$OUT/curves.log" 2>&1
note "parity_curves exit code $? in $(( $(date +%s) - start )) s"
tail -16 "$OUT/curves.log" | tee -a "$summary"
cp /tmp/parity-curves/curves.json /tmp/parity-curves/curves.svg "$OUT/" 2>/dev/null
(cd /tmp/parity-curves && find . -name "*.log" -o -name metrics.jsonl | tar czf "$OUT/curves-logs.tgz" -T -)
