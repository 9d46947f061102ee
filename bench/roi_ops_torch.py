#!/usr/bin/env python3
"""torchvision's RoI ops at bench_roi_ops' workloads, on the same GPU, for the minidet/torchvision ratio.

    python3 bench/roi_ops_torch.py --minidet-bin build/release/bench/bench_roi_ops   # runs both
    python3 bench/roi_ops_torch.py --minidet-json FILE   # FILE from: bench_roi_ops --skip-cpu --json FILE

A table of ops x workloads (OPS x WORKLOADS below, the same rows as bench_roi_ops.cpp; the RoIs come from
the same 64-bit LCG, so both sides time identical boxes). float32; "fwd" under no_grad, "fwd+bwd"
backpropagates a fixed random gradient to the features. CUDA events, 10 warm-up runs, median of --reps.
Its "fwd" row is also the peer of minidet's "fwd nocheck" (torchvision checks no roi values). It also times torchvision's CPU kernels with ONE thread (impl "torchvision-cpu-1t", device "cpu", a few
runs, printed before the GPU table; --skip-cpu leaves them out) for comparison with bench_roi_ops' CPU rows. Needs torch and torchvision; says so and exits 0
without them. The common parts are in bench_common.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import main, print_rows, time_cpu_ms, time_median_ms  # noqa: E402

# (n, c, h, w, rois, scale, pooled, sampling, grouped), as kWorkloads in bench_roi_ops.cpp; grouped: RoI k
# on image k * n // rois (each image's RoIs together, as a detector's sampler emits them), else k % n.
WORKLOADS = [
    (2, 256, 200, 272, 2000, 0.25, 7, 2, False),
    (8, 64, 32, 32, 1024, 0.125, 7, 2, False),
    (8, 128, 16, 16, 1024, 0.0625, 7, 2, True),
]


def label(wl):
    n, c, h, w, k, scale = wl[:6]
    return f"({n},{c},{h},{w}) K{k} 1/{1 / scale:g}"


class Lcg:
    """The generator of bench_roi_ops.cpp: state = state * a + c (mod 2^64), value = (state >> 11) / 2^53."""

    def __init__(self):
        self.state = 12345

    def next(self):
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return (self.state >> 11) / 9007199254740992.0


def axis_aligned_rois(torch, wl):
    n, c, h, w, k, scale = wl[:6]
    lcg, img_w, img_h, rows = Lcg(), w / scale, h / scale, []
    for i in range(k):
        bw = 8 + lcg.next() * (img_w / 2 - 8)
        bh = 8 + lcg.next() * (img_h / 2 - 8)
        x1, y1 = lcg.next() * (img_w - bw), lcg.next() * (img_h - bh)
        image = i * n // k if wl[8] else i % n
        rows.append([float(image), x1, y1, x1 + bw, y1 + bh])
    return torch.tensor(rows, dtype=torch.float32)


# To add an op: a (bench name, rois maker, apply(ops, x, rois, wl)) row, named as in bench_roi_ops.cpp.
OPS = [
    ("roi_align", axis_aligned_rois,
     lambda ops, x, rois, wl: ops.roi_align(x, rois, wl[6], spatial_scale=wl[5], sampling_ratio=wl[7], aligned=True)),
    # torchvision rounds the box before cutting bins, minidet does not: same work, slightly different bins.
    ("roi_pool", axis_aligned_rois,
     lambda ops, x, rois, wl: ops.roi_pool(x, rois, wl[6], spatial_scale=wl[5])),
    # roi_align_rotated: torchvision has none (and mmcv is not installed): bench_roi_ops times minidet alone.
]


def run_torch(torch, reps, args):
    try:
        import torchvision.ops as ops
    except ImportError:
        print("== torchvision: SKIPPED (not installed) ==")
        return "cuda:" + torch.cuda.get_device_name(0), []
    device_name = "cuda:" + torch.cuda.get_device_name(0)
    rows, cpu_rows = [], []  # CPU rows are printed here: the ratio table is for GPU rows only
    for bench, make_rois, apply in OPS:
        for wl in WORKLOADS:
            n, c, h, w = wl[:4]
            devices = (("cuda", "torchvision"),) + (() if args.skip_cpu else (("cpu", "torchvision-cpu-1t"),))
            for device, impl in devices:
                gen = torch.Generator(device=device).manual_seed(1)
                x = torch.randn(n, c, h, w, device=device, generator=gen, requires_grad=True)
                rois = make_rois(torch, wl).to(device)
                with torch.no_grad():
                    g = torch.randn(apply(ops, x, rois, wl).shape, device=device, generator=gen)

                def fwd():
                    with torch.no_grad():
                        apply(ops, x, rois, wl)

                def fwd_bwd():
                    x.grad = None
                    apply(ops, x, rois, wl).backward(g)

                for pass_name, fn in (("fwd", fwd), ("fwd+bwd", fwd_bwd)):
                    if device == "cuda":
                        ms, dev = time_median_ms(torch, fn, reps), device_name
                    else:
                        threads = torch.get_num_threads()
                        torch.set_num_threads(1)
                        ms, dev = time_cpu_ms(fn), "cpu"
                        torch.set_num_threads(threads)
                    (rows if device == "cuda" else cpu_rows).append({"bench": bench, "impl": impl, "device": dev, "shape": label(wl), "pass": pass_name,
                                 "median_ms": round(ms, 4)})
                    if pass_name == "fwd" and device == "cuda":
                        # torchvision checks no roi values: its one forward is the peer of minidet's
                        # "fwd nocheck" (check_roi_values off) too.
                        rows.append(dict(rows[-1], **{"pass": "fwd nocheck"}))
    if cpu_rows:
        print("== torchvision on the CPU, one thread, median of 3 ==")
        print_rows(cpu_rows)
    return device_name, rows


def add_arguments(parser):
    parser.add_argument("--skip-cpu", action="store_true",
                        help="time the GPU only (the CPU rows, one thread, take a minute), as bench_roi_ops --skip-cpu")


if __name__ == "__main__":
    sys.exit(main(__doc__, {name for name, _, _ in OPS}, run_torch, add_arguments))
