#!/usr/bin/env bash
# Part `bench` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# the benchmarks and their PyTorch twins
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
