#!/usr/bin/env bash
# Part `profile` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# ncu over about two training steps at batch 8, summed by kernel (scripts/ncu-summary.py;
# PROFILE_SKIP, PROFILE_COUNT launches, PROFILE_TOP rows); not in `all`
# Where a training step's GPU time goes, kernel by kernel: ncu over about two steps of `minidet train` at
# batch 8 (graph nodes profiled one by one), after PROFILE_SKIP launches of warm-up. Upper bounds: ncu
# serialises kernels and flushes caches.
note "== profile (ncu, ${PROFILE_COUNT:-1700} launches after ${PROFILE_SKIP:-12000})"
ncu --graph-profiling node --launch-skip "${PROFILE_SKIP:-12000}" --launch-count "${PROFILE_COUNT:-1700}" \
  --metrics gpu__time_duration.sum --csv build/gpu/examples/minidet/minidet train --device cuda \
  --out /tmp/minidet-profile --set schedule.steps=60 --set schedule.eval_every=1000 >"$OUT/kernels.csv" 2>"$OUT/profile.err"
note "ncu exit code $?"
python3 scripts/ncu-summary.py "$OUT/kernels.csv" --top "${PROFILE_TOP:-40}" 2>&1 | tee -a "$summary"
