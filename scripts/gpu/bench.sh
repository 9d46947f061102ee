#!/usr/bin/env bash
# Part `bench` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# the benchmarks and their PyTorch twins. BENCH names some (space-separated, e.g. "roi_ops detector"; default
# all). BENCH_ARGS go to every bench_<op>; with --skip-cpu among them the twins skip their CPU rows too.
# TIMELINE=1 also traces one detector step and inference batch at batch 8 (bench_detector --timeline: where the
# GPU waits for the host), into $OUT/timeline/.
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
if [[ ${TIMELINE:-0} == 1 && -x build/gpu/bench/bench_detector ]]; then
  note "--- bench_detector --timeline (CUPTI trace of one step from an idle GPU)"
  mkdir -p "$OUT/timeline"
  build/gpu/bench/bench_detector --skip-cpu --batches 8 --gpu-reps 20 --timeline "$OUT/timeline" 2>&1 |
    grep -v '^{' | tee -a "$summary"
fi
