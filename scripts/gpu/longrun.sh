#!/usr/bin/env bash
# Part `longrun` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# the long-run health tests for LONG_RUN_STEPS steps (default 300), CPU and CUDA
note "== long-run health, ${LONG_RUN_STEPS:=300} steps"
MINIDET_LONG_RUN_STEPS=$LONG_RUN_STEPS build/gpu/tests/test_models -tc="*long_run*" -s 2>&1 |
  grep -E "MESSAGE|ERROR|test cases" | tee -a "$summary"
