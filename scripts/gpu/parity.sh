#!/usr/bin/env bash
# Part `parity` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# minidet against the torchvision twin from the same weights on the same images
# (bench/detector_parity.py: every stage in eval mode, then PARITY_STEPS AdamW steps with the
# samplers' draws shared; one step in float32), float32 and float64 on the GPU, float64 on the CPU
# (PARITY_RUNS picks, e.g. "cuda float32"); docs/parity.md
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
