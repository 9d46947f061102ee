#!/usr/bin/env python3
"""torchvision nms / batched_nms and torch.sort at bench_nms's workloads, on the same GPU, for the ratio.

    python3 bench/nms_torch.py --minidet-bin build/release/bench/bench_nms   # runs both, one script run
    python3 bench/nms_torch.py --minidet-json FILE   # FILE from: bench_nms --skip-cpu --json FILE

Boxes: N = 1000, 5000, 20000, corners uniform in [0, 800), sizes uniform in [8, 208), scores uniform in
[0, 1), IoU threshold 0.7; batched_nms with class ids uniform in 0..79 (torchvision's CUDA batched_nms
shifts each class by class * (max coordinate + 1), then runs one nms). Sort: 20000 and 200000 float32 keys
from N(0, 1), torch.sort with stable=True (minidet's sort is always stable) and with the default.
torchvision's CUDA nms sorts the scores, computes the IoU bitmask on the GPU, copies the whole mask to the
host and runs the greedy pass there; each timed run is one call, as a user sees it. The common parts are in
bench_common.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import main, time_median_ms  # noqa: E402

THRESHOLD = 0.7
BOX_COUNTS = (1000, 5000, 20000)
SORT_SIZES = (20000, 200000)


def make_boxes(torch, n):
    gen = torch.Generator(device="cuda").manual_seed(n)
    xy = torch.rand(n, 2, device="cuda", generator=gen) * 800
    wh = 8 + torch.rand(n, 2, device="cuda", generator=gen) * 200
    boxes = torch.cat([xy, xy + wh], dim=1)
    scores = torch.rand(n, device="cuda", generator=gen)
    classes = torch.randint(0, 80, (n,), device="cuda", generator=gen)
    return boxes, scores, classes


def run_torch(torch, reps):
    device_name = "cuda:" + torch.cuda.get_device_name(0)
    rows = []
    try:
        import torchvision
    except ImportError:
        print("== torchvision: SKIPPED (not installed); torch.sort only ==")
        torchvision = None
    if torchvision is not None:
        ops = torchvision.ops
        for n in BOX_COUNTS:
            boxes, scores, classes = make_boxes(torch, n)
            for bench, fn in (("nms", lambda: ops.nms(boxes, scores, THRESHOLD)),
                              ("batched_nms", lambda: ops.batched_nms(boxes, scores, classes, THRESHOLD))):
                ms = time_median_ms(torch, fn, reps)
                rows.append({"bench": bench, "impl": "torchvision", "device": device_name, "shape": f"N={n}",
                             "pass": "iou0.7", "median_ms": round(ms, 4), "kept": int(fn().numel())})
    for n in SORT_SIZES:
        gen = torch.Generator(device="cuda").manual_seed(n)
        keys = torch.randn(n, device="cuda", generator=gen)
        for descending in (False, True):
            for impl, stable in (("torch-stable", True), ("torch", False)):
                ms = time_median_ms(torch, lambda: torch.sort(keys, descending=descending, stable=stable), reps)
                rows.append({"bench": "sort", "impl": impl, "device": device_name, "shape": f"n={n}",
                             "pass": "descending" if descending else "ascending", "median_ms": round(ms, 4)})
    return device_name, rows


if __name__ == "__main__":
    sys.exit(main(__doc__, {"nms", "batched_nms", "sort"}, run_torch))
