#!/usr/bin/env bash
# The README's test command: installs dependencies, builds (CUDA kernels too when nvcc is present) and runs
# the whole doctest suite through CTest. Without a GPU the cuda/* cases are listed as Skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --tests
jobs=$(nproc 2>/dev/null || echo 2)
bash scripts/configure-release.sh -DMINIDET_CUDA=ON  # scripts/main.sh may have turned the kernels off on a machine without a GPU
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"
