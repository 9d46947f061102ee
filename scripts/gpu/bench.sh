#!/usr/bin/env bash
# Part `bench` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# the benchmarks and their PyTorch twins. BENCH names some (space-separated, e.g. "roi_ops detector"; default
# all). BENCH_ARGS go to every bench_<op>; with --skip-cpu among them the twins skip their CPU rows too.
note "== benchmarks (bench/bench_<op> and, when present, its PyTorch twin bench/<op>_torch.py)"
: >"$OUT/bench.jsonl"
mkdir -p /tmp/minidet-bench
benches=()
for pattern in ${BENCH:-*}; do benches+=(build/gpu/bench/bench_$pattern); done
for b in "${benches[@]}"; do
  [[ -x $b ]] || continue
  name=$(basename "$b")
  op=${name#bench_}
  note "--- $name"
  # shellcheck disable=SC2086
  "$b" ${BENCH_ARGS:-} --json "/tmp/minidet-bench/$name.jsonl" 2>&1 | tee -a "$summary"
  cat "/tmp/minidet-bench/$name.jsonl" >>"$OUT/bench.jsonl"
  if [[ -f bench/${op}_torch.py ]]; then
    note "--- bench/${op}_torch.py (same GPU, same shapes)"
    extra=()
    if [[ " ${BENCH_ARGS:-} " == *" --skip-cpu "* ]]; then
      grep -q -- '"--skip-cpu"' "bench/${op}_torch.py" && extra=(--skip-cpu)
    elif [[ $op == detector ]]; then
      extra=(--cpu-threads 2)  # also PyTorch's CPU step, as bench_detector's CPU rows
    fi
    PYTHONUNBUFFERED=1 python3 "bench/${op}_torch.py" --minidet-json "/tmp/minidet-bench/$name.jsonl" \
      ${extra[@]+"${extra[@]}"} 2>&1 | tee -a "$summary"
  fi
done
