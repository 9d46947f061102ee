#!/usr/bin/env python3
"""torchvision.ops.box_iou at bench_box_iou's shapes, on the same GPU, for the minidet/torchvision ratio.

    python3 bench/box_iou_torch.py --minidet-bin build/release/bench/bench_box_iou   # runs both
    python3 bench/box_iou_torch.py --minidet-json FILE   # FILE from: bench_box_iou --skip-cpu --json FILE

Times float32 forward (under no_grad) and forward+backward (gradients into both box sets, from a fixed random
upstream gradient), CUDA events, 10 warm-up runs then the median of --reps (>= 50) runs. torchvision's
box_iou is a chain of broadcast elementwise ops (autograd differentiates through each); when torchvision
is not installed the same formula is written here in torch ops and labelled "torch-formula".
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import main, time_median_ms  # noqa: E402

SHAPES = [(2000, 2000), (20000, 200), (1000, 20)]  # as in bench_box_iou.cpp


def formula_box_iou(torch):
    def box_iou(a, b):  # torchvision's formula
        area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
        area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        lt = torch.max(a[:, None, :2], b[:, :2])
        rb = torch.min(a[:, None, 2:], b[:, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[:, :, 0] * wh[:, :, 1]
        return inter / (area_a[:, None] + area_b - inter)
    return box_iou


def random_boxes(torch, count, gen):
    corner = torch.rand(count, 2, device="cuda", generator=gen) * 800
    side = torch.rand(count, 2, device="cuda", generator=gen) * 200 + 8
    return torch.cat([corner, corner + side], 1)


def run_torch(torch, reps):
    try:
        from torchvision.ops import box_iou
        impl = "torchvision"
    except ImportError:
        box_iou, impl = formula_box_iou(torch), "torch-formula"
    device_name = "cuda:" + torch.cuda.get_device_name(0)
    rows = []
    for n, m in SHAPES:
        gen = torch.Generator(device="cuda").manual_seed(1)
        a = random_boxes(torch, n, gen).requires_grad_()
        b = random_boxes(torch, m, gen).requires_grad_()
        g = torch.randn(n, m, device="cuda", generator=gen)

        def fwd():
            with torch.no_grad():
                box_iou(a, b)

        def fwd_bwd():
            a.grad = b.grad = None
            box_iou(a, b).backward(g)

        for pass_name, fn in (("fwd", fwd), ("fwd+bwd", fwd_bwd)):
            ms = time_median_ms(torch, fn, reps)
            rows.append({"bench": "box_iou", "impl": impl, "device": device_name, "shape": f"{n}x{m}",
                         "pass": pass_name, "median_ms": round(ms, 4),
                         "gpairs_per_s": round(n * m / (ms * 1e6), 3)})
    return device_name, rows


if __name__ == "__main__":
    sys.exit(main(__doc__, {"box_iou"}, run_torch))
