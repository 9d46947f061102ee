#!/usr/bin/env bash
# Builds the GPU machine's binaries HERE, on a machine with nvcc but no GPU, and packs them for the trip:
# build/prebuilt.tgz holds the named targets of the gpu preset (sm_90), stripped, and the few libraries a
# Debian builder links that an Ubuntu GPU host lacks under that name. A fresh GPU machine then skips its
# cold build (minutes of device time):
#
#   bash scripts/prebuild-gpu.sh test_ops bench_roi_ops bench_detector      # here
#   PREBUILT=1 bash scripts/gpu-check.sh sanitize,bench                     # there, carrying build/prebuilt.tgz
#
# PREBUILT=1 unpacks the archive into build/gpu (scripts/gpu/build.sh) and checks that every binary finds
# its libraries. Graphviz is left out (MINIDET_GRAPHVIZ=OFF): GPU hosts often lack libgvc, and only the
# backward explorer's page needs it. ctest cannot use these binaries (its test lists name this machine's
# paths); run the test binaries directly, as the sanitize part does.
set -euo pipefail
cd "$(dirname "$0")/.."
(( $# > 0 )) || { echo "usage: $0 TARGET..." >&2; exit 2; }
cmake --preset gpu -DMINIDET_GRAPHVIZ=OFF >/dev/null
cmake --build --preset gpu -j "$(nproc)" --target "$@"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
files=()
for target in "$@"; do
  path=$(find build/gpu -type f -executable -name "$target" -not -path "*/CMakeFiles/*" -print -quit)
  [[ -n $path ]] || { echo "no binary for $target under build/gpu" >&2; exit 1; }
  mkdir -p "$stage/$(dirname "$path")"
  strip -o "$stage/$path" "$path"
  files+=("$path")
done
# Libraries by soname that the GPU image (Ubuntu 24.04) names differently or keeps off the loader's path.
mkdir -p "$stage/build/gpu/prebuilt-lib"
for lib in libjpeg.so.62 libcupti.so.13; do
  found=$(ldd "${files[@]}" 2>/dev/null | awk -v l="$lib" '$1 == l && !seen++ { print $3 }')
  [[ -n $found ]] && cp -L "$found" "$stage/build/gpu/prebuilt-lib/"
done
tar czf build/prebuilt.tgz -C "$stage" build
echo "build/prebuilt.tgz: $(du -h build/prebuilt.tgz | cut -f1) (${files[*]}); carry it and run with PREBUILT=1"
