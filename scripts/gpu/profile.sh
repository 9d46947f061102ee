#!/usr/bin/env bash
# Part `profile` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# ncu over a few training steps at batch 8, summed by kernel with the floor (scripts/ncu-summary.py;
# PROFILE_SKIP, PROFILE_COUNT launches, PROFILE_TOP rows); not in `all`
# PROFILE_ROI="op/workload/pass,..." profiles those rows of bench_roi_ops instead, one ncu run each, summed
# per iteration (the rows' value check runs once per iteration; a "fwd nocheck" row has none, so its totals
# are for all the launches), e.g.
#   PROFILE_ROI="roi_pool/tiny/fwd+bwd,roi_pool/tiny/fwd+bwd det" bash scripts/gpu-check.sh profile
# PROFILE_DEFORM="bench/shape/pass,..." does the same for rows of bench_deform_conv2d (bench dcn_v1 or dcn_v2,
# shape 0 or 1, summed per im2col launch: one per chunk of images, so per forward only when the batch is one
# chunk), and times the kernels of its peer, PyTorch's cuDNN conv2d of the same shape, forward and backward
# (bench/deform_conv2d_torch.py --profile-conv, torch.profiler):
#   PROFILE_DEFORM="dcn_v1/0/fwd+bwd,dcn_v1/1/fwd+bwd" bash scripts/gpu-check.sh profile
# Where a training step's GPU time goes, kernel by kernel, and the floor under it: ncu over a few steps of
# `minidet train` at batch 8 (graph nodes profiled one by one), after PROFILE_SKIP launches of warm-up, with
# the caches left warm between kernels (--cache-control none) and the clocks free (--clock-control none), as in
# a real step. Times are upper bounds: ncu serialises the kernels. The floor needs the GPU's peaks: DRAM
# bandwidth and FP32 rate from the data sheets of the SXM boards (H100 3.35 TB/s, H200 4.8 TB/s; 66.9 TFLOP/s
# of FP32 without tensor cores on both: 132 SMs x 128 FP32 lanes x 2 x 1.98 GHz).
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu_name" in
  *H200*) dram_tbs=4.8 ;;
  *H100*) dram_tbs=3.35 ;;
  *) dram_tbs=0 ;;  # unknown board: no floor, times only
esac
# Both uses: caches warm between kernels, clocks free, the floor's metrics, one CSV row per metric.
# PROFILE_EXTRA_METRICS (comma-separated ncu metrics) adds columns to the CSVs for a closer look, e.g. which
# unit a kernel saturates: l1tex__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput...
ncu_flags=(--cache-control none --clock-control none --print-units base --csv
           --metrics "$(python3 scripts/ncu-summary.py --print-metrics)${PROFILE_EXTRA_METRICS:+,$PROFILE_EXTRA_METRICS}")
# One ncu run over a row of a benchmark, summed by ncu-summary.py: profile_row CSV_NAME COUNT STEP_KERNEL
# PROGRAM ARGS... (the launches after PROFILE_SKIP, default 200; PROFILE_COUNT overrides COUNT).
profile_row() {
  local csv="$OUT/kernels-$1.csv" count=${PROFILE_COUNT:-$2} step_kernel=$3
  shift 3
  ncu --launch-skip "${PROFILE_SKIP:-200}" --launch-count "$count" "${ncu_flags[@]}" "$@" >"$csv" 2>>"$OUT/profile.err"
  python3 scripts/ncu-summary.py "$csv" --step-kernel "$step_kernel" --top "${PROFILE_TOP:-12}" \
    --dram-tbs "$dram_tbs" --fp32-tflops 66.9 2>&1 | tee -a "$summary"
}
if [[ -n ${PROFILE_ROI:-} ]]; then
  note "== profile (ncu on $gpu_name, rows of bench_roi_ops)"
  IFS=, read -ra rows <<<"$PROFILE_ROI"
  for row in "${rows[@]}"; do
    IFS=/ read -r op workload pass <<<"$row"
    note "-- $op, $workload, $pass: ncu over ${PROFILE_COUNT:-300} launches after ${PROFILE_SKIP:-200}"
    profile_row "${op}-${workload}-${pass//[^a-z]/_}" 300 first_bad_roi_kernel:1 \
      build/gpu/bench/bench_roi_ops --skip-cpu --gpu-reps 50 --op "$op" --workload "$workload" --pass "$pass"
  done
  return 0
fi
if [[ -n ${PROFILE_DEFORM:-} ]]; then
  note "== profile (ncu on $gpu_name, rows of bench_deform_conv2d and their cuDNN conv2d)"
  IFS=, read -ra rows <<<"$PROFILE_DEFORM"
  for row in "${rows[@]}"; do
    IFS=/ read -r bench shape pass <<<"$row"
    note "-- $bench, shape $shape, $pass: ncu over ${PROFILE_COUNT:-120} launches after ${PROFILE_SKIP:-200}"
    profile_row "${bench}-${shape}-${pass//[^a-z]/_}" 120 deform_im2col_kernel:1 \
      build/gpu/bench/bench_deform_conv2d --skip-cpu --bench "$bench" --shape "$shape" --pass "$pass"
    python3 bench/deform_conv2d_torch.py --profile-conv "$shape" 2>&1 | tee -a "$summary"
  done
  return 0
fi
note "== profile (ncu on $gpu_name, ${PROFILE_COUNT:-1700} launches after ${PROFILE_SKIP:-12000})"
ncu --graph-profiling node --launch-skip "${PROFILE_SKIP:-12000}" --launch-count "${PROFILE_COUNT:-1700}" \
  "${ncu_flags[@]}" build/gpu/examples/minidet/minidet train --device cuda \
  --out /tmp/minidet-profile --set schedule.steps=60 --set schedule.eval_every=1000 >"$OUT/kernels.csv" 2>"$OUT/profile.err"
note "ncu exit code $?"
python3 scripts/ncu-summary.py "$OUT/kernels.csv" --top "${PROFILE_TOP:-40}" --dram-tbs "$dram_tbs" --fp32-tflops 66.9 \
  2>&1 | tee -a "$summary"
