#!/usr/bin/env bash
# The README's main command: installs dependencies, builds the minidet program and trains the tiny Faster
# R-CNN on the synthetic shapes with the default config (examples/minidet/), on the GPU when there is one,
# evaluating it on the held-out split; it ends by printing where the run folder, plots and checkpoints are.
# Extra arguments go to `minidet train` (e.g. --device cpu --set schedule.steps=300 --out runs/short).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset release
cmake --build --preset release -j "$jobs" --target minidet
./build/release/examples/minidet/minidet train "$@"
