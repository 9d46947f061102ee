#!/usr/bin/env python3
"""PyTorch (cuDNN) conv2d at bench_conv2d's shapes, on the same GPU, for the minidet/PyTorch ratio.

    python3 bench/conv2d_torch.py --minidet-bin build/bench/bench_conv2d    # runs both, one script run
    python3 bench/conv2d_torch.py --minidet-json FILE   # FILE from: bench_conv2d --skip-cpu --json FILE

Times float32 forward (under no_grad) and forward+backward (grads of input, weight and bias) with
torch.backends.cudnn.benchmark = True, CUDA events, 10 warm-up runs then the median of --reps (>= 50) runs.
Two PyTorch settings are measured:
  * "torch-tf32": PyTorch's default for convolutions (torch.backends.cudnn.allow_tf32 = True), which rounds
    the inputs of the tensor-core math to TF32 (10-bit mantissa);
  * "torch-fp32": allow_tf32 = False, true FP32 like minidet (cuBLAS SGEMM, default math mode, no TF32).
The FP32 ratio is the like-for-like one. Prints a table and one JSON line per measurement; with
--minidet-json, also the ratio minidet_ms / torch_ms per shape and pass (> 1: minidet is slower).
Runs on a machine without CUDA too: it says so and exits 0. The common parts are in bench_common.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import main, time_median_ms  # noqa: E402

SHAPES = [  # (N, C_in, H, W, C_out, kernel, stride, pad), as in bench_conv2d.cpp
    (8, 3, 128, 128, 32, 3, 2, 1),
    (8, 32, 64, 64, 64, 3, 2, 1),
    (8, 64, 32, 32, 128, 3, 2, 1),
    (8, 128, 16, 16, 128, 3, 1, 1),
]


def label(s):
    n, c, h, w, o, k, st, _ = s
    return f"({n},{c},{h},{w})->{o} k{k} s{st}"


def forward_flops(s):
    n, c, h, w, o, k, st, p = s
    oh, ow = (h + 2 * p - k) // st + 1, (w + 2 * p - k) // st + 1
    return 2.0 * n * o * oh * ow * c * k * k


def run_torch(torch, reps):
    F = torch.nn.functional
    torch.backends.cudnn.benchmark = True
    device_name = "cuda:" + torch.cuda.get_device_name(0)
    rows = []
    for setting, tf32 in (("torch-fp32", False), ("torch-tf32", True)):
        torch.backends.cudnn.allow_tf32 = tf32
        for s in SHAPES:
            n, c, h, w, o, k, st, p = s
            gen = torch.Generator(device="cuda").manual_seed(1)
            x = torch.randn(n, c, h, w, device="cuda", generator=gen, requires_grad=True)
            wt = (0.1 * torch.randn(o, c, k, k, device="cuda", generator=gen)).requires_grad_()
            b = torch.randn(o, device="cuda", generator=gen, requires_grad=True)
            y_shape = F.conv2d(x.detach(), wt.detach(), b.detach(), stride=st, padding=p).shape
            g = torch.randn(y_shape, device="cuda", generator=gen)

            def fwd():
                with torch.no_grad():
                    F.conv2d(x, wt, b, stride=st, padding=p)

            def fwd_bwd():
                x.grad = wt.grad = b.grad = None
                F.conv2d(x, wt, b, stride=st, padding=p).backward(g)

            for pass_name, fn, mult in (("fwd", fwd, 1), ("fwd+bwd", fwd_bwd, 3)):
                ms = time_median_ms(torch, fn, reps)
                rows.append({"bench": "conv2d", "impl": setting, "device": device_name, "shape": label(s),
                             "pass": pass_name, "median_ms": round(ms, 4),
                             "gflops": round(forward_flops(s) * mult / (ms * 1e6), 1)})
    return device_name, rows


if __name__ == "__main__":
    sys.exit(main(__doc__, {"conv2d"}, run_torch))
