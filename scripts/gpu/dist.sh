#!/usr/bin/env bash
# Part `dist` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# on a machine with 2 GPUs: the dist cases (cuda/dist_ddp with
# NCCL), then minidet train's throughput on 1 and 2 GPUs at the same per-GPU batch
# (DIST_BATCH, default 8; otherwise the default config) and time to mAP@0.5 >= 0.95 at the same total
# batch (DIST_TTA_STEPS, default 1000, evaluated every 50 steps), each from metrics.jsonl
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
  python3 scripts/gpu/dist_metrics.py "/tmp/dist-$label/metrics.jsonl" "$batch" | tee -a "$summary"
}
# Throughput: the README's training (the default config: 750 steps of 8 images, evaluated every 250)
# on one GPU, and the same per-GPU batch on two; the last logged window holds no evaluation.
dist_run "1gpu-b$b" $b $minidet train --set schedule.batch=$b
dist_run "2gpu-b$((2 * b))" $((2 * b)) "${mpi[@]}" $minidet train --set schedule.batch=$((2 * b))
tta=(--set schedule.steps=${DIST_TTA_STEPS:-1000} --set schedule.eval_every=50 --set schedule.log_every=50)
dist_run "tta-1gpu-b$((2 * b))" $((2 * b)) $minidet train --set schedule.batch=$((2 * b)) "${tta[@]}"
dist_run "tta-2gpu-b$((2 * b))" $((2 * b)) "${mpi[@]}" $minidet train --set schedule.batch=$((2 * b)) "${tta[@]}"
