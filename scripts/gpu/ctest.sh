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

# The CUDA cases again with every kernel in its int64_t index variant (MINIDET_CUDA_INDEX64=1, see
# core/cuda/launch.h): otherwise those variants run only on tensors of 2^31 elements.
if [[ -z ${CTEST_ARGS:-} ]]; then
  note "== the cuda/ cases again with MINIDET_CUDA_INDEX64=1"
  start=$(date +%s)
  MINIDET_CUDA_INDEX64=1 ctest --preset gpu -j 16 -R "^cuda/" -E "^cuda/long_run" >"$OUT/ctest-index64.log" 2>&1
  note "ctest exit code $? in $(( $(date +%s) - start )) s"
  grep -E "tests passed|tests failed|\*\*\*Failed|Timeout" "$OUT/ctest-index64.log" | tee -a "$summary"
fi
