#!/usr/bin/env bash
# Configures the release preset (build/release) for scripts/main.sh and scripts/test.sh; arguments go to
# cmake (e.g. -DMINIDET_CUDA=OFF).
#
# A new build folder uses Ninja when it is installed (install-deps.sh installs it), else Make. Make builds
# one library at a time: a layer's files wait until every layer below it is compiled and archived, so on a
# small machine one core idles whenever a layer is down to its last file. Ninja starts a file as soon as the
# headers it needs exist, which keeps every core busy along minidet's chain of layers. A folder that exists
# keeps the generator it was made with: CMake cannot change it (delete build/release to switch).
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
if [[ ! -f build/release/CMakeCache.txt ]] && command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
cmake --preset release ${generator[@]+"${generator[@]}"} "$@"
