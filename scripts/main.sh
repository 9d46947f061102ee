#!/usr/bin/env bash
# The README's main command: installs dependencies, builds, and runs minidet's main end-to-end demo.
# Extra arguments go to the demo (e.g. --device cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset release
cmake --build --preset release -j "$jobs" --target train_mlp
./build/release/examples/train_mlp "$@"
