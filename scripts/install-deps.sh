#!/usr/bin/env bash
# Installs what minidet needs to build on Debian/Ubuntu, and only what is missing.
# As root it uses apt-get; otherwise sudo when available; else it lists the missing packages and fails.
# MPI (dist/, `mpirun -np N minidet train`) is installed too; NCCL is optional and never installed here.
# CUDA is optional: with nvcc present (e.g. /usr/local/cuda/bin/nvcc) the CUDA kernels are built too.
#
#   install-deps.sh           what building and training need (scripts/main.sh)
#   install-deps.sh --tests   and what the test suite's outside judges need (scripts/test.sh): shapely, and a
#                             headless browser for the backward explorer's page
set -euo pipefail
tests=false
case ${1:-} in
  "") ;;
  --tests) tests=true ;;
  *) echo "install-deps: unknown argument '$1' (expected nothing or --tests)" >&2; exit 2 ;;
esac

missing=()
need() {  # need <package> <file or command that proves it is there>
  local package=$1 probe=$2
  if [[ $probe == /* ]]; then [[ -e $probe ]] || missing+=("$package")
  else command -v "$probe" >/dev/null 2>&1 || missing+=("$package"); fi
}
need cmake cmake
need g++ g++
need make make
need libeigen3-dev /usr/include/eigen3/Eigen/Core
need doctest-dev /usr/include/doctest/doctest.h
need nlohmann-json3-dev /usr/include/nlohmann/json.hpp
need libpng-dev /usr/include/png.h
need libjpeg-dev /usr/include/jpeglib.h
need libcli11-dev /usr/include/CLI/CLI.hpp  # examples: command lines
# dist/: multi-process training (mpirun). The header's folder names the architecture, hence the glob.
compgen -G "/usr/lib/*/openmpi/include/mpi.h" >/dev/null || missing+=(libopenmpi-dev)
need openmpi-bin mpirun
# The backward explorer's page (autograd/backward_html.h): Graphviz lays out its graph, found through
# pkg-config. Optional: without it (the GPU machine has none) everything else builds and the page writers
# throw a clear error.
need libgraphviz-dev /usr/include/graphviz/gvc.h
need pkg-config pkg-config
if $tests; then
  # tests/reference/: shapely judges box_iou_rotated's polygon areas and the rotated evaluator.
  need python3 python3
  need python3-shapely /usr/lib/python3/dist-packages/shapely/__init__.py
  # tests/browser/: the explorer's page played in Debian's headless chromium, driven by chromedriver through
  # selenium (no browser download). Where they are missing the browser tests report themselves Skipped.
  need chromium chromium
  need chromium-driver chromedriver
  need python3-selenium /usr/lib/python3/dist-packages/selenium/__init__.py
fi
# Ninja builds a new build/release faster than Make (scripts/configure-release.sh), which it falls back to:
# installed along with anything else, or alone where this script may install, never a reason to fail.
can_install=false
if [[ $(id -u) -eq 0 ]] || command -v sudo >/dev/null 2>&1; then can_install=true; fi
if ! command -v ninja >/dev/null 2>&1 && { [[ ${#missing[@]} -gt 0 ]] || $can_install; }; then
  missing+=(ninja-build)
fi
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all build dependencies are present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
elif command -v sudo >/dev/null 2>&1; then
  sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
else
  echo "install-deps: missing packages: ${missing[*]}" >&2
  echo "install-deps: run as root, or: apt-get install ${missing[*]}" >&2
  exit 1
fi
