#!/usr/bin/env bash
# Part `train` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# minidet train on the GPU (TRAIN_ARGS; TRAIN_SWEEP="args|args|..." runs variants side by side)
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
