#!/usr/bin/env bash
# The whole CPU suite under AddressSanitizer + UndefinedBehaviorSanitizer (the asan preset: RelWithDebInfo,
# CUDA off). Any sanitizer report fails the run: UBSan is built to halt on the first error
# (see MINIDET_SANITIZE in CMakeLists.txt). Extra arguments go to ctest (e.g. -R errors/).
#   bash scripts/asan.sh                 # about an hour of CPU time: use many cores (the GPU machine has 16)
#   MINIDET_FUZZ_ITERATIONS=20000 bash scripts/asan.sh -R fuzz_readers
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --tests
jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset asan
cmake --build --preset asan -j "$jobs"
# detect_leaks: a leaked tensor or graph node is a bug here too. allocator_may_return_null: a failed
# allocation returns null to minidet's allocator, which throws its out-of-memory error (tested), instead of
# ASan aborting the process.
common=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
# The mpirun tests (dist/, and minidet's data-parallel case) run apart: OpenMPI keeps some allocations to
# the end of the process, which LeakSanitizer reports; scripts/lsan-openmpi.supp suppresses frames in
# OpenMPI's own libraries only. For those frames to have names, OpenMPI's plugins stay loaded
# (disable_dlclose) and leak stacks are unwound the slow, exact way (fast_unwind_on_malloc=0, which costs
# time on every malloc, hence only for these tests).
mpi_tests='dist_|mpirun'
rc=0
ASAN_OPTIONS=${ASAN_OPTIONS:-$common} ctest --preset asan -j "$jobs" -E "$mpi_tests" "$@" || rc=1
OMPI_MCA_mca_base_component_disable_dlclose=1 \
  LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan-openmpi.supp:print_suppressions=0} \
  ASAN_OPTIONS=${ASAN_OPTIONS:-$common:fast_unwind_on_malloc=0} ctest --preset asan -j "$jobs" -R "$mpi_tests" "$@" || rc=1
exit $rc
