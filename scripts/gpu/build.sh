#!/usr/bin/env bash
# Part `build` of scripts/gpu-check.sh, which always runs it first (sourced: $OUT, $summary and note() come
# from there): the device, then the gpu preset (sm_90) built with every core. BUILD_TARGETS (space-separated)
# builds only those targets and what they need, e.g. "test_ops bench_detector".
note "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader | tee -a "$summary"
nvcc --version | tail -1 | tee -a "$summary"

# PREBUILT=1: use binaries built elsewhere instead of building: build/prebuilt.tgz from
# scripts/prebuild-gpu.sh (cross-built for sm_90 on a machine with nvcc and no GPU, carried here), which saves
# the minutes of a cold build on a fresh GPU machine. Only the parts that run binaries directly (sanitize,
# bench, profile) can use them: ctest needs the build folder's own test lists. The archive's prebuilt-lib
# holds the libraries this machine lacks under the builder's names; LD_LIBRARY_PATH puts it first.
if [[ ${PREBUILT:-0} == 1 ]]; then
  note "== build skipped (PREBUILT=1): the binaries of build/prebuilt.tgz"
  tar xzf build/prebuilt.tgz || { note "PREBUILT=1 but no build/prebuilt.tgz (scripts/prebuild-gpu.sh makes it)"; exit 1; }
  [[ -d build/gpu/prebuilt-lib ]] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$PWD/build/gpu/prebuilt-lib
  for b in build/gpu/tests/test_* build/gpu/bench/bench_*; do
    [[ -x $b ]] || continue
    note "  $b"
    if ldd "$b" | grep -q "not found"; then
      ldd "$b" | grep "not found" | tee -a "$summary"
      note "PREBUILT BINARY CANNOT RUN HERE: $b"
      exit 1
    fi
  done
  return 0 2>/dev/null || exit 0
fi

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
