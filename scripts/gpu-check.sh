#!/usr/bin/env bash
# The one command for a GPU machine: configure and build for sm_90 (-j16), run the whole suite (the cuda/*
# cases run here), run compute-sanitizer on the CUDA cases, and run the benchmarks. Logs go to $OUT (the
# device tool brings that folder back; at most 8 files), default /tmp/minidet-gpu.
#
#   bash scripts/gpu-check.sh            # everything
#   bash scripts/gpu-check.sh tests      # build + tests + sanitizer only
#   bash scripts/gpu-check.sh bench      # build + benchmarks only
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/minidet-gpu}
mkdir -p "$OUT"
what=${1:-all}
summary="$OUT/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

note "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader | tee -a "$summary"
nvcc --version | tail -1 | tee -a "$summary"

note "== build (preset gpu, sm_90)"
start=$(date +%s)
if ! { cmake --preset gpu && cmake --build --preset gpu -j 16; } >"$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  note "BUILD FAILED (see build.log)"
  exit 1
fi
note "built in $(( $(date +%s) - start )) s"

if [[ $what == all || $what == tests ]]; then
  note "== tests (ctest, all families, CUDA included)"
  ctest --preset gpu -j 16 >"$OUT/ctest.log" 2>&1
  note "ctest exit code $?"
  grep -E "tests passed|tests failed|Skipped|\*\*\*Failed|Timeout" "$OUT/ctest.log" | tee -a "$summary"

  note "== compute-sanitizer memcheck on the cuda/* cases"
  : >"$OUT/sanitizer.log"
  for t in build/gpu/tests/test_*; do
    [[ -x $t ]] || continue
    echo "--- $t" >>"$OUT/sanitizer.log"
    compute-sanitizer --tool memcheck --error-exitcode 99 "$t" -tc="cuda/*" >>"$OUT/sanitizer.log" 2>&1
    note "$(basename "$t"): sanitizer exit code $?  $(grep -E 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -1)"
  done
fi

if [[ $what == all || $what == bench ]]; then
  note "== benchmarks"
  : >"$OUT/bench.jsonl"
  for b in build/gpu/bench/bench_*; do
    [[ -x $b ]] || continue
    note "--- $(basename "$b")"
    "$b" --json "$OUT/bench.jsonl" 2>&1 | tee -a "$summary"
  done
  for py in bench/*_torch.py; do
    [[ -f $py ]] || continue
    note "--- $py"
    PYTHONUNBUFFERED=1 python3 "$py" --minidet-json "$OUT/bench.jsonl" 2>&1 | tee -a "$summary"
  done
fi
note "== done"
