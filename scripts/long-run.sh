#!/usr/bin/env bash
# The long-run health tests for many steps (tests/models/test_long_run.cpp): live tensors and, on a GPU,
# the caching allocator's reserved bytes must stop growing after warm-up.
#   bash scripts/long-run.sh [STEPS, default 500] [build dir, default build/release]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${2:-build/release}
cmake --build "$build" --target test_models -j "$(nproc 2>/dev/null || echo 2)"
MINIDET_LONG_RUN_STEPS=${1:-500} "$build/tests/test_models" -tc="*long_run*" -s 2>&1 | grep -E "MESSAGE|ERROR|test cases"
