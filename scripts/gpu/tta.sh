#!/usr/bin/env bash
# Part `tta` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# time to accuracy of the detector, minidet and torchvision (bench_detector and
# bench/detector_torch.py --time-to-accuracy; minutes each, so not in `all`; TTA_ARGS for both)
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
