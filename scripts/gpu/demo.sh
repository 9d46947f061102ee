#!/usr/bin/env bash
# Part `demo` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# examples/train_mlp on the GPU, then the backward explorer's records of a CUDA detector step (minidet explain
# and walkthrough_detector, as JSON: the GPU machine has no Graphviz to lay out the page; make the pages
# elsewhere with `minidet explain --from-record FILE --out PAGE.html`).
note "== the main demo on the GPU (examples/train_mlp --device cuda)"
build/gpu/examples/train_mlp --device cuda --no-trace --dot /tmp/mlp_graph.dot 2>&1 | tail -4 | tee -a "$summary"
note "== backward explorer records of a CUDA detector step"
build/gpu/examples/minidet/minidet explain --device cuda --image-index 3 --record "$OUT/explain-cuda.json" 2>&1 \
  | tail -4 | tee -a "$summary"
build/gpu/examples/walkthrough_detector --device cuda --trace none --dot /tmp/detector_graph.dot \
  --record "$OUT/walkthrough-cuda.json" 2>&1 | tail -2 | tee -a "$summary"
