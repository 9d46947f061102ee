#!/usr/bin/env bash
# The CPU step of this working tree against another revision's, run side by side: both builds at once, each
# on its own set of pinned cores, so that both see whatever else the host is doing, and the sets swapped every
# round. On a shared host (a GPU machine's, a VM) runs one after the other do not compare: the host's speed
# moves by a quarter within minutes (docs/benchmarks.md, "Results: the H200 machine's host CPU").
#
#   bash scripts/side-by-side.sh REV [ROUNDS]        # default 3 rounds
#   CORES_A=2,3 CORES_B=4,5 PRESET=cpu BENCH_ARGS="--skip-gpu --batches 8 --cpu-reps 10" (the defaults)
#
# REV is checked out as a git worktree under build/side-by-side/REV; both trees build bench_detector with
# PRESET. Each round prints both medians (training step and inference, ms). OMP_NUM_THREADS follows the
# number of cores in a set.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: bash scripts/side-by-side.sh REV [ROUNDS]}
rounds=${2:-3}
cores_a=${CORES_A:-2,3}
cores_b=${CORES_B:-4,5}
preset=${PRESET:-cpu}
bench_args=${BENCH_ARGS:---skip-gpu --batches 8 --cpu-reps 10}
[[ $(tr -cd , <<<"$cores_a") == $(tr -cd , <<<"$cores_b") ]] || { echo "CORES_A and CORES_B must hold as many cores" >&2; exit 2; }
threads=$(( $(tr -cd , <<<"$cores_a" | wc -c) + 1 ))

base=build/side-by-side/$rev
if [[ ! -d $base ]]; then
  git worktree add --detach "$base" "$rev" >/dev/null
fi
jobs=$(nproc 2>/dev/null || echo 2)
for tree in . "$base"; do
  (cd "$tree" && cmake --preset "$preset" >/dev/null && cmake --build --preset "$preset" -j "$jobs" --target bench_detector >/dev/null)
done

# One bench_detector run pinned to $2, its medians on one line.
medians() {
  OMP_NUM_THREADS=$threads taskset -c "$2" "$1/build/$preset/bench/bench_detector" $bench_args 2>&1 |
    sed -n 's/.*"pass":"\([a-z-]*\)","median_ms":\([0-9.]*\).*/\1 \2/p' | tr '\n' ' '
}
echo "this tree ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', modified')) against $rev, $threads threads each"
for ((r = 1; r <= rounds; ++r)); do
  if ((r % 2)); then this_cores=$cores_a base_cores=$cores_b; else this_cores=$cores_b base_cores=$cores_a; fi
  out_this=$(mktemp) out_base=$(mktemp)
  medians . "$this_cores" >"$out_this" &
  medians "$base" "$base_cores" >"$out_base" &
  wait
  echo "round $r  this (cores $this_cores): $(cat "$out_this")  $rev (cores $base_cores): $(cat "$out_base")"
  rm -f "$out_this" "$out_base"
done
