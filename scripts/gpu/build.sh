#!/usr/bin/env bash
# Part `build` of scripts/gpu-check.sh, which always runs it first (sourced: $OUT, $summary and note() come
# from there): the device, then the gpu preset (sm_90) built with every core. BUILD_TARGETS (space-separated)
# builds only those targets and what they need, e.g. "test_ops bench_detector".
note "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader | tee -a "$summary"
nvcc --version | tail -1 | tee -a "$summary"

note "== build (preset gpu, sm_90)"
start=$(date +%s)
# A new build folder uses Ninja when the machine has it, as scripts/configure-release.sh does; else Make, whose
# layers still compile side by side (CMAKE_OPTIMIZE_DEPENDENCIES in CMakeLists.txt).
generator=()
if [[ ! -f build/gpu/CMakeCache.txt ]] && command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
# shellcheck disable=SC2086
if ! { cmake --preset gpu ${generator[@]+"${generator[@]}"} && cmake --build --preset gpu -j "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}; } \
  >"$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  note "BUILD FAILED (see build.log)"
  exit 1
fi
note "built in $(( $(date +%s) - start )) s ($(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' build/gpu/CMakeCache.txt))"
