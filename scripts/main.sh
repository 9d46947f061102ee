#!/usr/bin/env bash
# The README's main command: installs dependencies, builds, trains the tiny Faster R-CNN on the synthetic
# shapes and evaluates it on the held-out split (examples/train_detector.cpp), on the GPU when there is one.
# Extra arguments go to the program (e.g. --device cpu --steps 300).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset release
cmake --build --preset release -j "$jobs" --target train_detector
./build/release/examples/train_detector "$@"
