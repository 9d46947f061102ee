#!/usr/bin/env bash
# Part `asan` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# the whole CPU suite under AddressSanitizer + UBSan (scripts/asan.sh's build, on 16 cores)
note "== AddressSanitizer + UBSan over the whole CPU suite (scripts/asan.sh: preset asan, 16 jobs)"
start=$(date +%s)
bash scripts/asan.sh >"$OUT/asan.log" 2>&1
note "asan exit code $? in $(( $(date +%s) - start )) s"
grep -E "tests passed|tests failed|\*\*\*Failed|Timeout" "$OUT/asan.log" | tee -a "$summary"
