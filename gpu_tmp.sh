#!/usr/bin/env bash
# profile script (not committed)
set -u
tar xzf build/prebuilt.tgz && export LD_LIBRARY_PATH=$PWD/build/gpu/prebuilt-lib:${LD_LIBRARY_PATH:-}
B=build/gpu/bench/bench_roi_ops
nvidia-smi -L > $OUT/summary.txt
$B --skip-cpu --op roi_pool --json $OUT/pool.json > $OUT/bench.txt 2>&1
$B --skip-cpu --op roi_align --json $OUT/align.json >> $OUT/bench.txt 2>&1
cat $OUT/pool.json $OUT/align.json > $OUT/m.json
python3 bench/roi_ops_torch.py --skip-cpu --minidet-json $OUT/m.json > $OUT/ratio.txt 2>&1
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section SchedulerStats --section WarpStateStats --section LaunchStats"
for wl in tiny head; do
  timeout 100 ncu --launch-skip 40 --launch-count 12 --metrics gpu__time_duration.sum $B --skip-cpu --op roi_pool --workload $wl --pass "fwd nocheck" > $OUT/p_all_pool_$wl.txt 2>&1
  timeout 100 ncu --launch-skip 40 --launch-count 12 --metrics gpu__time_duration.sum $B --skip-cpu --op roi_pool --workload $wl --pass "fwd+bwd" > $OUT/p_all_poolbwd_$wl.txt 2>&1
done
timeout 100 ncu --kernel-name regex:"plane|forward" --launch-skip 3 --launch-count 2 $SEC $B --skip-cpu --op roi_pool --workload tiny --pass "fwd nocheck" > $OUT/p_pool_tiny.txt 2>&1
timeout 100 ncu --launch-skip 40 --launch-count 16 --metrics gpu__time_duration.sum $B --skip-cpu --op roi_align --workload tiny --pass "fwd+bwd" > $OUT/p_all_alignbwd_tiny.txt 2>&1
timeout 100 ncu --kernel-name regex:backward_separable --launch-skip 3 --launch-count 1 $SEC $B --skip-cpu --op roi_align --workload tiny --pass "fwd+bwd" > $OUT/p_alignbwd_tiny.txt 2>&1
cat > /tmp/tv.py <<'PY'
import sys, torch, torchvision.ops as ops
sys.path.insert(0, "bench")
import roi_ops_torch as r
op, wi, bwd = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
wl = r.WORKLOADS[wi]
n, c, h, w = wl[:4]
x = torch.randn(n, c, h, w, device="cuda", requires_grad=bwd)
rois = r.axis_aligned_rois(torch, wl).cuda()
apply = {name: f for name, _, f in r.OPS}[op]
for _ in range(6):
    if bwd:
        y = apply(ops, x, rois, wl); y.backward(torch.ones_like(y))
    else:
        with torch.no_grad(): apply(ops, x, rois, wl)
torch.cuda.synchronize()
PY
timeout 100 ncu --kernel-name regex:roi_pool --launch-skip 3 --launch-count 1 $SEC python3 /tmp/tv.py roi_pool 1 0 > $OUT/p_tv_pool_tiny.txt 2>&1
timeout 100 ncu --launch-skip 12 --launch-count 12 --metrics gpu__time_duration.sum python3 /tmp/tv.py roi_align 1 1 > $OUT/p_tv_alignbwd_tiny.txt 2>&1
cd $OUT && tar czf logs.tgz bench.txt p_*.txt m.json && rm -f bench.txt p_*.txt *.json
