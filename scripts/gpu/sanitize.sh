#!/usr/bin/env bash
# Part `sanitize` of scripts/gpu-check.sh (sourced by it: $OUT, $summary and note() come from there).
# compute-sanitizer memcheck, racecheck and initcheck on the cuda/ cases (TOOLS, FILTER,
# SAN_EXCLUDE, SAN_SHARD cases per process (RACE_SHARD for racecheck), SAN_TIMEOUT seconds each); logs in sanitizer-parts.tgz

# memcheck: out-of-bounds and misaligned accesses, leaks; racecheck: shared-memory hazards between the
# threads of a block; initcheck: reads of device memory nothing wrote. TOOLS picks the tools (default all three); FILTER narrows the cases (default cuda/*);
# SAN_EXCLUDE leaves cases out (default: the out-of-memory case, whose failing cudaMalloc of 1 TiB is the
# point of the test but which memcheck reports as an API error; the training demos and the long-run health
# case, which only repeat for many steps kernels that cuda/faster_rcnn checks once, and take minutes under
# racecheck and initcheck). Every (tool, binary) pair runs side by side (one GPU,
# 16 cores), each bounded by SAN_TIMEOUT seconds, so the whole check ends within a bounded time.
tools=(${TOOLS:-memcheck racecheck initcheck})
filter=${FILTER:-cuda/*}
exclude=${SAN_EXCLUDE:-cuda/small_cnn*,cuda/long_run*,cuda/allocator: an absurd request*}
note "== compute-sanitizer ${tools[*]} on the $filter cases (excluding $exclude), ${SAN_TIMEOUT:-240} s cap each"
start=$(date +%s)
# Long binaries are cut into shards of SAN_SHARD cases (doctest's 1-based --first/--last over the
# cases that pass the filters), so no single process has to check 50 cases within the cap; racecheck,
# which runs shared-memory kernels several times slower (the NMS cases), in shards of RACE_SHARD.
shard=${SAN_SHARD:-8}
parts=()
for t in build/gpu/tests/test_*; do
  [[ -x $t ]] || continue
  # Only binaries that have matching cases (listing includes skipped cases, see tests/main.cpp).
  n=$("$t" -ltc -tc="$filter" -tce="$exclude" 2>/dev/null | grep -c "^cuda/")
  (( n > 0 )) || continue
  for tool in "${tools[@]}"; do
    size=$shard
    [[ $tool == racecheck ]] && size=${RACE_SHARD:-4}
    for (( first = 1; first <= n; first += size )); do
      last=$(( first + size - 1 < n ? first + size - 1 : n ))
      part="/tmp/sanitizer-$tool-$(basename "$t")-$first-$last"
      parts+=("$part")
      (
        timeout "${SAN_TIMEOUT:-240}" compute-sanitizer --tool "$tool" --error-exitcode 99 "$t" \
          -tc="$filter" -tce="$exclude" --first="$first" --last="$last" >"$part.log" 2>&1
        # 99 = sanitizer errors, 1 = a test failed, 124 = timeout
        echo $? >"$part.rc"
      ) &
    done
  done
done
wait
for tool in "${tools[@]}"; do
  log="$OUT/sanitizer-$tool.log"
  : >"$log"
  for part in "${parts[@]}"; do
    [[ $part == */sanitizer-$tool-* ]] || continue
    name=${part#/tmp/sanitizer-$tool-}
    { echo "--- $name"; cat "$part.log"; } >>"$log"
    note "$tool $name: exit code $(cat "$part.rc"), $(grep -Eo '[0-9]+ failed' "$part.log" | tail -1) (doctest counts every case in range),$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$part.log" | tail -1 | sed 's/=========//')"
  done
done
note "sanitizers took $(( $(date +%s) - start )) s"
# Per-part logs travel as one archive, so a runner that fetches few files still gets them all.
tar czf "$OUT/sanitizer-parts.tgz" /tmp/sanitizer-*.log 2>/dev/null
