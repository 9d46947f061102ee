#!/usr/bin/env bash
# Part `demo` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# examples/train_mlp on the GPU
note "== the main demo on the GPU (examples/train_mlp --device cuda)"
build/gpu/examples/train_mlp --device cuda --no-trace --dot /tmp/mlp_graph.dot 2>&1 | tail -4 | tee -a "$summary"
