#!/usr/bin/env bash
# Configures the release preset (build/release) for scripts/main.sh and scripts/test.sh; arguments go to
# cmake (e.g. -DMINIDET_CUDA=OFF).
#
# A new build folder uses Ninja when it is installed (install-deps.sh installs it), else Make. Ninja sees every
# file of the build at once and starts each as soon as the headers it needs exist, which keeps every core
# busy along minidet's chain of layers. Make works target by target: its layers compile side by side
# (CMAKE_OPTIMIZE_DEPENDENCIES in CMakeLists.txt), but each test and program waits for all its archives
# before any of its own files start. A folder that exists keeps the generator it was made with: CMake
# cannot change it (delete build/release to switch).
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
if [[ ! -f build/release/CMakeCache.txt ]] && command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
cmake --preset release ${generator[@]+"${generator[@]}"} "$@"
