#!/usr/bin/env bash
# The one command for a GPU machine: configure and build for sm_90 (-j nproc), run the whole suite (the cuda/*
# cases run here), run compute-sanitizer on the CUDA cases, train the detector, and run the benchmarks.
# Logs go to $OUT, default /tmp/minidet-gpu. Each part is a script of its own under scripts/gpu/, sourced here
# in a fixed order after scripts/gpu/build.sh.
#
# PREBUILT=1 skips the build and uses build/prebuilt.tgz, binaries cross-built by scripts/prebuild-gpu.sh on a
# machine without a GPU and carried here (for sanitize, bench and profile; scripts/gpu/build.sh says more).
#
# The argument is a comma-separated list of parts (default: all):
#   ctest     the whole suite (CUDA cases included; CTEST_ARGS="-R ^cuda/" runs only the GPU cases, which the
#             CPU-only CI cannot), then, without CTEST_ARGS, the cuda/ cases again with MINIDET_CUDA_INDEX64=1
#             (every kernel in its int64_t index variant)
#   sanitize  compute-sanitizer memcheck, racecheck and initcheck on the cuda/ cases (TOOLS, FILTER,
#             SAN_EXCLUDE, SAN_SHARD cases per process (RACE_SHARD for racecheck), SAN_TIMEOUT seconds each); logs in sanitizer-parts.tgz
#   demo      examples/train_mlp on the GPU
#   train     minidet train on the GPU (TRAIN_ARGS; TRAIN_SWEEP="args|args|..." runs variants side by side)
#   bench     the benchmarks and their PyTorch twins (TIMELINE=1: also bench_detector --timeline, scripts/gpu/bench.sh)
#   profile   ncu over about two training steps at batch 8, summed by kernel (scripts/ncu-summary.py;
#             PROFILE_SKIP, PROFILE_COUNT launches, PROFILE_TOP rows); not in `all`
#   tta       time to accuracy of the detector, minidet and torchvision (bench_detector and
#             bench/detector_torch.py --time-to-accuracy; minutes each, so not in `all`; TTA_ARGS for both)
#   asan      the whole CPU suite under AddressSanitizer + UBSan (scripts/asan.sh's build, on 16 cores)
#   longrun   the long-run health tests for LONG_RUN_STEPS steps (default 300), CPU and CUDA
#   dist      data parallel on every GPU of the machine (DIST_PARTS of cases,throughput,accuracy,lr,hosts; see
#             scripts/gpu/dist.sh): the dist cases, images/s on 1, 2, 4... GPUs, mAP curves at the same total
#             batch with SyncBatchNorm, the learning-rate rule, and two hosts played by one machine
#   killresume  scripts/kill-resume.sh: KILL_TRIALS (default 100) kill -9 / --resume trials of a tiny CPU
#             minidet train; the summary's "corrupt checkpoints found" must be 0
#   parity    minidet against the torchvision twin from the same weights on the same images
#             (bench/detector_parity.py: every stage in eval mode, then PARITY_STEPS AdamW steps with the
#   tests     = ctest,sanitize,demo          all = tests,train,bench
#
#   bash scripts/gpu-check.sh ctest,train
#   TOOLS=memcheck FILTER="cuda/nms*" bash scripts/gpu-check.sh sanitize   # one sanitizer, some cases
#   BENCH=nms bash scripts/gpu-check.sh bench                              # one benchmark and its twin
#   TTA_ARGS="--target 0.9 --eval-every 25" bash scripts/gpu-check.sh tta
#   TRAIN_SWEEP="--set schedule.lr=1e-3|--set schedule.lr=2e-3" bash scripts/gpu-check.sh train
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/minidet-gpu}
mkdir -p "$OUT"
what=${1:-all}
what=${what//tests/ctest,sanitize,demo}
what=${what//all/ctest,sanitize,demo,train,bench}
summary="$OUT/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

parts=(ctest sanitize demo train asan longrun dist killresume bench tta parity curves profile)
for part in ${what//,/ }; do
  [[ " ${parts[*]} " == *" $part "* ]] || { echo "gpu-check: unknown part '$part' (parts: ${parts[*]})" >&2; exit 2; }
done
# shellcheck source=gpu/build.sh
source scripts/gpu/build.sh
for part in "${parts[@]}"; do
  # shellcheck disable=SC1090
  [[ ,$what, == *,$part,* ]] && source "scripts/gpu/$part.sh"
done

# A runner that fetches only a few files from $OUT (MAX_OUT_FILES, default 8) gets all but the summary as one
# archive, logs.tgz, with paths relative to $OUT.
if (( $(find "$OUT" -type f | wc -l) > ${MAX_OUT_FILES:-8} )); then
  (cd "$OUT" && find . -type f ! -name summary.txt ! -name logs.tgz -print0 | tar czf logs.tgz --null -T - --remove-files)
  find "$OUT" -mindepth 1 -type d -empty -delete
  note "more than ${MAX_OUT_FILES:-8} files: all but summary.txt are in logs.tgz"
fi
note "== done"
