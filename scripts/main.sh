#!/usr/bin/env bash
# The README's main command: installs dependencies, builds the minidet program and trains the tiny Faster
# R-CNN on the synthetic shapes with the default config (examples/minidet/), on the GPU when there is one,
# evaluating it on the held-out split; it ends by printing where the run folder, plots and checkpoints are.
# Extra arguments go to `minidet train` (e.g. --device cpu --set schedule.steps=300 --out runs/short).
#
# Without a GPU (nvidia-smi lists none) the CUDA kernels are not compiled, even when nvcc is there: the
# run could not use them, and they are most of the build. MINIDET_CUDA=ON or OFF decides instead.
# scripts/test.sh always builds them when nvcc is found, so CI still compiles every kernel.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
if [[ -z ${MINIDET_CUDA:-} ]]; then
  MINIDET_CUDA=OFF
  if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then MINIDET_CUDA=ON; fi
fi
bash scripts/configure-release.sh -DMINIDET_CUDA="$MINIDET_CUDA"
cmake --build --preset release -j "$jobs" --target minidet
./build/release/examples/minidet/minidet train "$@"
