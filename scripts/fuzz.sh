#!/usr/bin/env bash
# Fuzz every reader of outside data for much longer than CI does (tests/errors/fuzz.h):
#   bash scripts/fuzz.sh [ITERATIONS per reader, default 20000] [build dir, default build/release]
# A failing input is saved as /tmp/minidet-fuzz-<reader>-<N>; once the reader is fixed, copy it into
# tests/errors/corpus/<reader>/ so the suite reads it on every run. Run it on the asan build as well
# (scripts/asan.sh builds one) to turn silent memory errors into failures.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${2:-build/release}
cmake --build "$build" --target test_errors -j "$(nproc 2>/dev/null || echo 2)"
MINIDET_FUZZ_ITERATIONS=${1:-20000} "$build/tests/test_errors" -tc="errors/fuzz_readers*" -s 2>&1 |
  grep -E "accepted|ERROR|test cases"
