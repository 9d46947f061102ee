#!/usr/bin/env python3
"""torchvision.ops.deform_conv2d and torch conv2d at bench_deform_conv2d's shapes, on the same GPU, for the
minidet/PyTorch ratios.

    python3 bench/deform_conv2d_torch.py --minidet-bin build/release/bench/bench_deform_conv2d   # runs both
    python3 bench/deform_conv2d_torch.py --minidet-json FILE   # FILE from: bench_deform_conv2d --skip-cpu --json FILE

Times float32 forward (under no_grad) and forward+backward (gradients of input, offset, weight, bias and,
for DCNv2, mask) with CUDA events, 10 warm-up runs then the median of --reps (>= 50) runs. TF32 is off for
both cuDNN and cuBLAS (torchvision's deform_conv2d runs its GEMMs through cuBLAS), so every impl computes
in true FP32 like minidet. Two impls per row key:
  * "torchvision-fp32": torchvision.ops.deform_conv2d with the same inputs (offsets N(0, 1), mask U(0, 1));
  * "torch-conv2d-fp32": a plain conv2d (cuDNN, benchmark mode) of the same shape: the floor a deformable
    conv is measured against (it has no bilinear sampling and no offset/mask gradients).
With --minidet-json, prints minidet_ms / torch_ms per shape and pass (< 1: minidet is faster).
`--profile-conv I` only runs the plain conv2d of SHAPES[I], forward and backward, 10 times and then 20 times
under torch.profiler, and prints its kernels' GPU time per iteration (scripts/gpu/profile.sh prints it beside
ncu's view of minidet's deformable conv; the backward runs on autograd's own thread, out of reach of ncu's
per-thread NVTX filter, so CUPTI's kernel records are the simpler judge).
Runs on a machine without CUDA or torchvision too: it says so and exits 0. Common parts: bench_common.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import main, time_median_ms  # noqa: E402

SHAPES = [  # (N, C_in, H, W, C_out, kernel, pad), as in bench_deform_conv2d.cpp
    (8, 64, 64, 64, 64, 3, 1),
    (2, 256, 50, 68, 256, 3, 1),
]


def label(s):
    n, c, h, w, o, k, p = s
    return f"({n},{c},{h},{w})->{o} k{k} p{p}"


def run_torch(torch, reps):
    try:
        from torchvision.ops import deform_conv2d
    except ImportError:
        print("== torchvision: SKIPPED (not installed) ==")
        return "cuda:" + torch.cuda.get_device_name(0), []
    F = torch.nn.functional
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    device_name = "cuda:" + torch.cuda.get_device_name(0)
    rows = []
    for s in SHAPES:
        n, c, h, w, o, k, p = s
        oh, ow = h + 2 * p - k + 1, w + 2 * p - k + 1
        for bench, modulated in (("dcn_v1", False), ("dcn_v2", True)):
            gen = torch.Generator(device="cuda").manual_seed(1)
            x = torch.randn(n, c, h, w, device="cuda", generator=gen, requires_grad=True)
            off = torch.randn(n, 2 * k * k, oh, ow, device="cuda", generator=gen, requires_grad=True)
            mask = (torch.rand(n, k * k, oh, ow, device="cuda", generator=gen).requires_grad_()
                    if modulated else None)
            wt = (0.05 * torch.randn(o, c, k, k, device="cuda", generator=gen)).requires_grad_()
            b = torch.randn(o, device="cuda", generator=gen, requires_grad=True)
            g = torch.randn(n, o, oh, ow, device="cuda", generator=gen)
            leaves = [t for t in (x, off, mask, wt, b) if t is not None]

            def clear():
                for t in leaves:
                    t.grad = None

            def dcn_fwd():
                with torch.no_grad():
                    deform_conv2d(x, off, wt, b, padding=p, mask=mask)

            def dcn_fwd_bwd():
                clear()
                deform_conv2d(x, off, wt, b, padding=p, mask=mask).backward(g)

            def conv_fwd():
                with torch.no_grad():
                    F.conv2d(x, wt, b, padding=p)

            def conv_fwd_bwd():
                clear()
                F.conv2d(x, wt, b, padding=p).backward(g)

            for impl, fwd, fwd_bwd in (("torchvision-fp32", dcn_fwd, dcn_fwd_bwd),
                                       ("torch-conv2d-fp32", conv_fwd, conv_fwd_bwd)):
                for pass_name, fn in (("fwd", fwd), ("fwd+bwd", fwd_bwd)):
                    ms = time_median_ms(torch, fn, reps)
                    rows.append({"bench": bench, "impl": impl, "device": device_name, "shape": label(s),
                                 "pass": pass_name, "median_ms": round(ms, 4)})
    return device_name, rows


def profile_conv(index):
    """The peer of a profiled bench_deform_conv2d row: cuDNN's conv2d of SHAPES[index], fwd+bwd."""
    if not 0 <= index < len(SHAPES):
        print(f"--profile-conv: shape index {index} is not in 0..{len(SHAPES) - 1}", file=sys.stderr)
        return 2
    import torch
    if not torch.cuda.is_available():
        print("== --profile-conv: SKIPPED (no CUDA device) ==")
        return 0
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    n, c, h, w, o, k, p = SHAPES[index]
    x = torch.randn(n, c, h, w, device="cuda", requires_grad=True)
    wt = (0.05 * torch.randn(o, c, k, k, device="cuda")).requires_grad_()
    b = torch.randn(o, device="cuda", requires_grad=True)
    g = torch.randn(n, o, h + 2 * p - k + 1, w + 2 * p - k + 1, device="cuda")

    def step():
        for t in (x, wt, b):
            t.grad = None
        torch.nn.functional.conv2d(x, wt, b, padding=p).backward(g)

    for _ in range(10):
        step()
    torch.cuda.synchronize()
    iterations = 20
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(iterations):
            step()
        torch.cuda.synchronize()
    kernels = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            us, launches = kernels.get(event.name, (0.0, 0))
            kernels[event.name] = (us + event.device_time_total, launches + 1)
    total = sum(us for us, _ in kernels.values()) / iterations
    print(f"cuDNN conv2d {label(SHAPES[index])}, forward and backward: {total / 1000:.3f} ms of kernels per "
          f"iteration (torch.profiler, mean of {iterations})")
    print(f"{'ms':>8} {'launches':>8}  kernel")
    for name, (us, launches) in sorted(kernels.items(), key=lambda kv: -kv[1][0]):
        print(f"{us / iterations / 1000:8.3f} {launches / iterations:8.1f}  {name[:100]}")


if __name__ == "__main__":
    if "--profile-conv" in sys.argv:
        at = sys.argv.index("--profile-conv") + 1
        if at >= len(sys.argv) or not sys.argv[at].isdigit():
            sys.exit("--profile-conv takes a shape index (0, 1, ...)")
        sys.exit(profile_conv(int(sys.argv[at])))
    sys.exit(main(__doc__, {"dcn_v1", "dcn_v2"}, run_torch))
