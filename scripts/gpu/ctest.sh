#!/usr/bin/env bash
# Part `ctest` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# the whole suite (CUDA cases included; CTEST_ARGS="-R ^cuda/" runs only the GPU cases, which the
# CPU-only CI cannot)
note "== tests (ctest, all families, CUDA included)"
start=$(date +%s)
# shellcheck disable=SC2086
ctest --preset gpu -j 16 ${CTEST_ARGS:-} >"$OUT/ctest.log" 2>&1
rc=$?
note "ctest exit code $rc in $(( $(date +%s) - start )) s"
grep -E "tests passed|tests failed|Skipped|\*\*\*Failed|Timeout" "$OUT/ctest.log" | tee -a "$summary"
