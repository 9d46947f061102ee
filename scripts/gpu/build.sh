#!/usr/bin/env bash
# Part `build` of scripts/gpu-check.sh, which always runs it first (sourced: $OUT, $summary and note() come
# from there): the device, then the gpu preset (sm_90) built with every core. BUILD_TARGETS (space-separated)
# builds only those targets and what they need, e.g. "test_ops bench_detector".
note "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader | tee -a "$summary"
nvcc --version | tail -1 | tee -a "$summary"

note "== build (preset gpu, sm_90)"
start=$(date +%s)
# shellcheck disable=SC2086
if ! { cmake --preset gpu && cmake --build --preset gpu -j "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}; } \
  >"$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  note "BUILD FAILED (see build.log)"
  exit 1
fi
note "built in $(( $(date +%s) - start )) s"
