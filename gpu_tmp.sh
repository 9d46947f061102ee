#!/usr/bin/env bash
# final check (not committed)
set -u
tar xzf build/prebuilt.tgz && export LD_LIBRARY_PATH=$PWD/build/gpu/prebuilt-lib:${LD_LIBRARY_PATH:-}
T=build/gpu/tests/test_ops; B=build/gpu/bench/bench_roi_ops
{
nvidia-smi -L
echo "== tests"; $T -tc="cuda/roi*,cuda/deform*" 2>&1 | tail -3
echo "== memcheck"; timeout 200 compute-sanitizer --tool memcheck $T -tc="cuda/roi_align*" 2>&1 | tail -2
for r in 1 2; do
$B --skip-cpu --op roi_align --pass "fwd+bwd det" 2>&1 | grep -E "^roi_align"
$B --skip-cpu --op roi_align --pass "fwd+bwd" 2>&1 | grep -E "^roi_align"
done
} > $OUT/final.txt 2>&1
