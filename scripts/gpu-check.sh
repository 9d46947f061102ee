#!/usr/bin/env bash
# The one command for a GPU machine: configure and build for sm_90 (-j nproc), run the whole suite (the cuda/*
# cases run here), run compute-sanitizer on the CUDA cases, train the detector, and run the benchmarks.
# Logs go to $OUT (the device tool brings that folder back), default /tmp/minidet-gpu.
#
# The argument is a comma-separated list of parts (default: all):
#   ctest     the whole suite (CUDA cases included; CTEST_ARGS="-R ^cuda/" runs only the GPU cases, which the
#             CPU-only CI cannot)
#   sanitize  compute-sanitizer memcheck, racecheck and initcheck on the cuda/ cases (TOOLS, FILTER,
#             SAN_EXCLUDE, SAN_SHARD cases per process (RACE_SHARD for racecheck), SAN_TIMEOUT seconds each); logs in sanitizer-parts.tgz
#   demo      examples/train_mlp on the GPU
#   train     minidet train on the GPU (TRAIN_ARGS; TRAIN_SWEEP="args|args|..." runs variants side by side)
#   bench     the benchmarks and their PyTorch twins
#   profile   ncu over about two training steps at batch 8, summed by kernel (scripts/ncu-summary.py;
#             PROFILE_SKIP, PROFILE_COUNT launches, PROFILE_TOP rows); not in `all`
#   tta       time to accuracy of the detector, minidet and torchvision (bench_detector and
#             bench/detector_torch.py --time-to-accuracy; minutes each, so not in `all`; TTA_ARGS for both)
#   asan      the whole CPU suite under AddressSanitizer + UBSan (scripts/asan.sh's build, on 16 cores)
#   longrun   the long-run health tests for LONG_RUN_STEPS steps (default 300), CPU and CUDA
#   dist      issue 16 on a machine with 2 GPUs (kind nvidia-h100-x2): the dist cases (cuda/dist_ddp with
#             NCCL), then minidet train's throughput on 1 and 2 GPUs at the same per-GPU batch
#             (DIST_BATCH, default 8; otherwise the default config) and time to mAP@0.5 >= 0.95 at the same total
#             batch (DIST_TTA_STEPS, default 1000, evaluated every 50 steps), each from metrics.jsonl
#   killresume  scripts/kill-resume.sh: KILL_TRIALS (default 100) kill -9 / --resume trials of a tiny CPU
#             minidet train; the summary's "corrupt checkpoints found" must be 0
#   parity    minidet against the torchvision twin from the same weights on the same images
#             (bench/detector_parity.py: every stage in eval mode, then PARITY_STEPS AdamW steps with the
#             samplers' draws shared; one step in float32), float32 and float64 on the GPU, float64 on the CPU
#             (PARITY_RUNS picks, e.g. "cuda float32"); docs/parity.md
#   curves    learning parity (bench/parity_curves.py): both sides from the same weights on the same batches,
#             CURVE_SEEDS (default "0 1 2 3 4") for CURVE_STEPS (default 750), scored by the same evaluator; curves.json and curves.svg
#   tests     = ctest,sanitize,demo          all = tests,train,bench
# A full run may not fit one 10-minute device call: run `tests`, then `train,bench` on the still-warm machine.
#
# Budgeting a session's 30 device minutes (measured 2026-11-25). The lease counts every second a machine is
# held, start-up included; a machine goes back 30 s after its last call ends, and a fresh one builds again:
#   - the build alone takes 290-320 s on a fresh H100 machine (x1 or x2, 16 or 32 jobs), so a session has
#     room for about two fresh machines; chain the calls back to back on one warm machine instead;
#   - CTEST_ARGS="-R ^cuda/" ctest: 24-27 s; dist: ~150 s at 500 images/s, ~55 s at 900 with DIST_TTA_STEPS=600
#     (main b63668f); BENCH=detector bench: ~100 s; sanitize with SAN_SHARD=8, RACE_SHARD=4, SAN_TIMEOUT=200:
#     181 s, every part finished (b63668f);
#   - measured 2026-11-25 at b63668f: call 1 `ctest,dist` 325 s with a 248 s build, call 2 `sanitize,bench`
#     285 s: 357 s and 293 s of device time with start-up and idle, 650 s, about a third of a session's;
#   - the device tool returns at most 8 files from $OUT: past 8, the script packs all but summary.txt into logs.tgz.
# One x2 machine serves everything: `CTEST_ARGS="-R ^cuda/" ... ctest,dist` then `... sanitize,bench`.
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
wants() { [[ ,$what, == *,$1,* ]]; }
summary="$OUT/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

note "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader | tee -a "$summary"
nvcc --version | tail -1 | tee -a "$summary"

note "== build (preset gpu, sm_90)"
start=$(date +%s)
# BUILD_TARGETS (space-separated) builds only those targets and what they need, e.g. "test_ops bench_detector".
# shellcheck disable=SC2086
if ! { cmake --preset gpu && cmake --build --preset gpu -j "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}; } \
  >"$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  note "BUILD FAILED (see build.log)"
  exit 1
fi
note "built in $(( $(date +%s) - start )) s"

if wants ctest; then
  note "== tests (ctest, all families, CUDA included)"
  start=$(date +%s)
  # shellcheck disable=SC2086
  ctest --preset gpu -j 16 ${CTEST_ARGS:-} >"$OUT/ctest.log" 2>&1
  rc=$?
  note "ctest exit code $rc in $(( $(date +%s) - start )) s"
  grep -E "tests passed|tests failed|Skipped|\*\*\*Failed|Timeout" "$OUT/ctest.log" | tee -a "$summary"
fi

if wants sanitize; then

  # memcheck: out-of-bounds and misaligned accesses, leaks; racecheck: shared-memory hazards between the
  # threads of a block; initcheck: reads of device memory nothing wrote. TOOLS picks the tools (default all three); FILTER narrows the cases (default cuda/*);
  # SAN_EXCLUDE leaves cases out (default: the out-of-memory case, whose failing cudaMalloc of 1 TiB is the
  # point of the test but which memcheck reports as an API error; the training demos and the long-run health
  # case, which only repeat for many steps kernels that cuda/faster_rcnn checks once, and take minutes under
  # racecheck and initcheck). Every (tool, binary) pair runs side by side (one GPU,
  # 16 cores), each bounded by SAN_TIMEOUT seconds, so the whole check fits one device call.
  tools=(${TOOLS:-memcheck racecheck initcheck})
  filter=${FILTER:-cuda/*}
  exclude=${SAN_EXCLUDE:-cuda/small_cnn*,cuda/long_run*,cuda/allocator: an absurd request*}
  note "== compute-sanitizer ${tools[*]} on the $filter cases (excluding $exclude), ${SAN_TIMEOUT:-240} s cap each"
  start=$(date +%s)
  # Long binaries are cut into shards of SAN_SHARD cases (doctest's 1-based --first/--last over the
  # cases that pass the filters), so no single process has to check 50 cases within the cap; racecheck,
  # which runs shared-memory kernels several times slower (the NMS cases), in shards of RACE_SHARD.
  shard=${SAN_SHARD:-8}
  parts=()
  for t in build/gpu/tests/test_*; do
    [[ -x $t ]] || continue
    # Only binaries that have matching cases (listing includes skipped cases, see tests/main.cpp).
    n=$("$t" -ltc -tc="$filter" -tce="$exclude" 2>/dev/null | grep -c "^cuda/")
    (( n > 0 )) || continue
    for tool in "${tools[@]}"; do
      size=$shard
      [[ $tool == racecheck ]] && size=${RACE_SHARD:-4}
      for (( first = 1; first <= n; first += size )); do
        last=$(( first + size - 1 < n ? first + size - 1 : n ))
        part="/tmp/sanitizer-$tool-$(basename "$t")-$first-$last"
        parts+=("$part")
        (
          timeout "${SAN_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --error-exitcode 99 "$t" \
            -tc="$filter" -tce="$exclude" --first="$first" --last="$last" >"$part.log" 2>&1
          # 99 = sanitizer errors, 1 = a test failed, 124 = timeout
          echo $? >"$part.rc"
        ) &
      done
    done
  done
  wait
  for tool in "${tools[@]}"; do
    log="$OUT/sanitizer-$tool.log"
    : >"$log"
    for part in "${parts[@]}"; do
      [[ $part == */sanitizer-$tool-* ]] || continue
      name=${part#/tmp/sanitizer-$tool-}
      { echo "--- $name"; cat "$part.log"; } >>"$log"
      note "$tool $name: exit code $(cat "$part.rc"), $(grep -Eo '[0-9]+ failed' "$part.log" | tail -1) (doctest counts every case in range),$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$part.log" | tail -1 | sed 's/=========//')"
    done
  done
  note "sanitizers took $(( $(date +%s) - start )) s"
  # The device tool brings back a limited number of files: the per-part logs travel as one archive.
  tar czf "$OUT/sanitizer-parts.tgz" /tmp/sanitizer-*.log 2>/dev/null
fi

if wants demo; then
  note "== the main demo on the GPU (examples/train_mlp --device cuda)"
  build/gpu/examples/train_mlp --device cuda --no-trace --dot /tmp/mlp_graph.dot 2>&1 | tail -4 | tee -a "$summary"
fi

if wants train; then
  # `minidet train` on the synthetic shapes, evaluated on the held-out split (VOC mAP@0.5, COCO AP). Variants
  # of TRAIN_SWEEP run side by side on the one GPU, so their times are not for reports; a single run is.
  # Each run folder's metrics.jsonl, config.json and plots come back under $OUT/run-<i>/.
  IFS='|' read -r -a variants <<<"${TRAIN_SWEEP:-}"
  (( ${#variants[@]} > 0 )) || variants=("")
  note "== minidet train --device cuda ${TRAIN_ARGS:-} (variants: ${#variants[@]})"
  for i in "${!variants[@]}"; do
    rm -rf "/tmp/minidet-run-$i"  # a warm machine keeps the last call's runs
    # shellcheck disable=SC2086
    build/gpu/examples/minidet/minidet train --device cuda --out "/tmp/minidet-run-$i" ${TRAIN_ARGS:-} \
      ${variants[$i]} >"$OUT/train-$i.log" 2>&1 &
  done
  wait
  for i in "${!variants[@]}"; do
    note "--- variant $i: ${variants[$i]}"
    grep -E "^(minidet train|evaluation at|trained|minidet:)" "$OUT/train-$i.log" | tee -a "$summary"
    mkdir -p "$OUT/run-$i"
    cp /tmp/minidet-run-$i/{metrics.jsonl,config.json,loss.png,map.png} "$OUT/run-$i/" 2>/dev/null
  done
fi

if wants asan; then
  note "== AddressSanitizer + UBSan over the whole CPU suite (scripts/asan.sh: preset asan, 16 jobs)"
  start=$(date +%s)
  bash scripts/asan.sh >"$OUT/asan.log" 2>&1
  note "asan exit code $? in $(( $(date +%s) - start )) s"
  grep -E "tests passed|tests failed|\*\*\*Failed|Timeout" "$OUT/asan.log" | tee -a "$summary"
fi

if wants longrun; then
  note "== long-run health, ${LONG_RUN_STEPS:=300} steps"
  MINIDET_LONG_RUN_STEPS=$LONG_RUN_STEPS build/gpu/tests/test_models -tc="*long_run*" -s 2>&1 |
    grep -E "MESSAGE|ERROR|test cases" | tee -a "$summary"
fi

if wants dist; then
  note "== data parallel on $(nvidia-smi -L | wc -l) GPUs (dist cases, then 1 vs 2 GPUs)"
  ctest --preset gpu -L dist >"$OUT/dist-ctest.log" 2>&1
  note "dist ctest exit code $?"
  grep -E "tests passed|tests failed|Skipped|\*\*\*Failed|Timeout" "$OUT/dist-ctest.log" | tee -a "$summary"
  minidet=build/gpu/examples/minidet/minidet
  mpi=(mpirun --allow-run-as-root -np 2 --bind-to none)
  b=${DIST_BATCH:-8}
  # $1: label; $2: images per step of the whole job; the rest: the command. Prints the logged images/s (median
  # and mean) and the eval lines' mAP and train_s.
  dist_run() {
    local label=$1 batch=$2
    shift 2
    rm -rf "/tmp/dist-$label"
    "$@" --device cuda --out "/tmp/dist-$label" >"$OUT/dist-$label.log" 2>&1
    note "$label: exit code $? ($*)"
    mkdir -p "$OUT/dist-$label" && cp "/tmp/dist-$label/metrics.jsonl" "$OUT/dist-$label/" 2>/dev/null
    python3 - "/tmp/dist-$label/metrics.jsonl" "$batch" <<'PY' | tee -a "$summary"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
train = [l for l in lines if l["type"] == "train"]
evals = [l for l in lines if l["type"] == "eval"]
rates = sorted(l["images_per_s"] for l in train if l["step"] >= 100)  # after warm-up; the median skips
if rates: print(f"  median images/s over the logged windows from step 100: {rates[len(rates) // 2]:.0f}")  # eval windows
# The windows' rates swing with the training state (how many proposals survive NMS): the mean rate over the
# same steps of both runs compares them better. From step 100 (or the last evaluation before it) to the last
# evaluation, on the training clock (train_s, which leaves evaluations out).
start = next(((l["step"], l["elapsed_s"]) for l in train if l["step"] == 100), (0, 0.0))
for e in evals:
    if e["step"] <= 100: start = (e["step"], e["train_s"])
if evals and evals[-1]["step"] > start[0]:
    end = evals[-1]
    rate = (end["step"] - start[0]) * int(sys.argv[2]) / (end["train_s"] - start[1])
    print(f"  mean images/s from step {start[0]} to {end['step']} on the training clock: {rate:.0f}")
hit = next((e for e in evals if e["map50"] >= 0.95), None)
for e in evals[-1:] + ([hit] if hit and hit is not evals[-1] else []):
    print(f"  eval at step {e['step']}: mAP@0.5 {e['map50']:.4f} COCO AP {e['coco_ap']:.4f} after {e['train_s']:.1f} s of training")
print("  mAP@0.5 >= 0.95 first at step", hit["step"] if hit else "never")
PY
  }
  # Throughput: the README's training (the default config: 750 steps of 8 images, evaluated every 250)
  # on one GPU, and the same per-GPU batch on two; the last logged window holds no evaluation.
  dist_run "1gpu-b$b" $b $minidet train --set schedule.batch=$b
  dist_run "2gpu-b$((2 * b))" $((2 * b)) "${mpi[@]}" $minidet train --set schedule.batch=$((2 * b))
  tta=(--set schedule.steps=${DIST_TTA_STEPS:-1000} --set schedule.eval_every=50 --set schedule.log_every=50)
  dist_run "tta-1gpu-b$((2 * b))" $((2 * b)) $minidet train --set schedule.batch=$((2 * b)) "${tta[@]}"
  dist_run "tta-2gpu-b$((2 * b))" $((2 * b)) "${mpi[@]}" $minidet train --set schedule.batch=$((2 * b)) "${tta[@]}"
fi

if wants killresume; then
  note "== kill -9 / --resume trials of minidet train, ${KILL_TRIALS:=100} trials"
  bash scripts/kill-resume.sh "$KILL_TRIALS" build/gpu >"$OUT/killresume.log" 2>&1
  note "kill-resume exit code $?"
  grep -E "summary|PASSED|FAILED|ERROR" "$OUT/killresume.log" | tee -a "$summary"
fi

if wants bench; then
  note "== benchmarks (bench/bench_<op> and, when present, its PyTorch twin bench/<op>_torch.py)"
  : >"$OUT/bench.jsonl"
  mkdir -p /tmp/minidet-bench
  for b in build/gpu/bench/bench_${BENCH:-*}; do
    [[ -x $b ]] || continue
    name=$(basename "$b")
    op=${name#bench_}
    note "--- $name"
    "$b" --json "/tmp/minidet-bench/$name.jsonl" 2>&1 | tee -a "$summary"
    cat "/tmp/minidet-bench/$name.jsonl" >>"$OUT/bench.jsonl"
    if [[ -f bench/${op}_torch.py ]]; then
      note "--- bench/${op}_torch.py (same GPU, same shapes)"
      extra=()
      [[ $op == detector ]] && extra=(--cpu-threads 2)  # also PyTorch's CPU step, as bench_detector's CPU rows
      PYTHONUNBUFFERED=1 python3 "bench/${op}_torch.py" --minidet-json "/tmp/minidet-bench/$name.jsonl" "${extra[@]}" 2>&1 |
        tee -a "$summary"
    fi
  done
fi
if wants tta; then
  # Both detectors train from scratch with minidet's default schedule and are evaluated on the held-out
  # shapes every --eval-every steps; the training clock stops during evaluations. Output: $OUT/tta.jsonl.
  note "== time to accuracy (bench_detector and bench/detector_torch.py --time-to-accuracy ${TTA_ARGS:-})"
  mkdir -p /tmp/minidet-bench
  rm -f /tmp/minidet-bench/tta.jsonl
  # shellcheck disable=SC2086
  build/gpu/bench/bench_detector --time-to-accuracy ${TTA_ARGS:-} --json /tmp/minidet-bench/tta.jsonl 2>&1 |
    tee -a "$summary"
  cp /tmp/minidet-bench/tta.jsonl "$OUT/tta.jsonl" 2>/dev/null
  # shellcheck disable=SC2086
  PYTHONUNBUFFERED=1 python3 bench/detector_torch.py --time-to-accuracy ${TTA_ARGS:-} \
    --minidet-json /tmp/minidet-bench/tta.jsonl 2>&1 | tee -a "$summary"
fi
if wants parity; then
  note "== parity with torchvision (bench/detector_parity.py, ${PARITY_STEPS:=20} AdamW steps)"
  IFS=',' read -r -a parity_runs <<<"${PARITY_RUNS:-cuda float32,cuda float64,cpu float64}"
  for run in "${parity_runs[@]}"; do
    read -r device dtype <<<"$run"
    steps=$PARITY_STEPS
    [[ $dtype == float32 ]] && steps=1  # one step in float32 (bench/detector_parity.py says why)
    log="$OUT/parity-$device-$dtype.log"
    PYTHONUNBUFFERED=1 python3 bench/detector_parity.py --minidet-bin build/gpu/bench/parity_minidet --device "$device" \
      --dtype "$dtype" --steps "$steps" --keep "/tmp/parity-$device-$dtype" >"$log" 2>&1
    note "--- $device $dtype: exit code $? ($(tail -1 "$log"))"
    grep -E "^(FAIL|ok )" "$log" | grep -vE "^ok  step ([1-9]|1[0-8]):" | tee -a "$summary"
  done
fi
if wants curves; then
  note "== learning parity (bench/parity_curves.py, seeds ${CURVE_SEEDS:=0 1 2 3 4})"
  start=$(date +%s)
  rm -rf /tmp/parity-curves
  # Seeds train side by side: 3 CPU threads each keeps 5 of them from fighting over the 16 cores. Bounded by
  # CURVES_TIMEOUT seconds so that the logs still come back from one device call.
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=3 PYTHONUNBUFFERED=1 timeout "${CURVES_TIMEOUT:-480}" python3 bench/parity_curves.py --build build/gpu \
    --out /tmp/parity-curves --seeds $CURVE_SEEDS --steps "${CURVE_STEPS:-750}" >"$OUT/curves.log" 2>&1
  note "parity_curves exit code $? in $(( $(date +%s) - start )) s"
  tail -16 "$OUT/curves.log" | tee -a "$summary"
  cp /tmp/parity-curves/curves.json /tmp/parity-curves/curves.svg "$OUT/" 2>/dev/null
  (cd /tmp/parity-curves && find . -name "*.log" -o -name metrics.jsonl | tar czf "$OUT/curves-logs.tgz" -T -)
fi
if wants profile; then
  # Where a training step's GPU time goes, kernel by kernel: ncu over about two steps of `minidet train` at
  # batch 8 (graph nodes profiled one by one), after PROFILE_SKIP launches of warm-up. Upper bounds: ncu
  # serialises kernels and flushes caches.
  note "== profile (ncu, ${PROFILE_COUNT:-1700} launches after ${PROFILE_SKIP:-12000})"
  ncu --graph-profiling node --launch-skip "${PROFILE_SKIP:-12000}" --launch-count "${PROFILE_COUNT:-1700}" \
    --metrics gpu__time_duration.sum --csv build/gpu/examples/minidet/minidet train --device cuda \
    --out /tmp/minidet-profile --set schedule.steps=60 --set schedule.eval_every=1000 >"$OUT/kernels.csv" 2>"$OUT/profile.err"
  note "ncu exit code $?"
  python3 scripts/ncu-summary.py "$OUT/kernels.csv" --top "${PROFILE_TOP:-40}" 2>&1 | tee -a "$summary"
fi
# The device tool brings back at most 8 files from $OUT: past that, everything but the summary travels as one
# archive (logs.tgz, paths relative to $OUT).
if (( $(find "$OUT" -type f | wc -l) > 8 )); then
  (cd "$OUT" && find . -type f ! -name summary.txt ! -name logs.tgz -print0 | tar czf logs.tgz --null -T - --remove-files)
  find "$OUT" -mindepth 1 -type d -empty -delete
  note "more than 8 files: all but summary.txt are in logs.tgz"
fi
note "== done"
