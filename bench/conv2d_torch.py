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
Runs on a machine without CUDA too: it says so and exits 0.
"""
import argparse
import json
import sys

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


def time_median_ms(torch, fn, reps):
    for _ in range(10):
        fn()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    mid = len(times) // 2
    return times[mid] if len(times) % 2 else 0.5 * (times[mid - 1] + times[mid])


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
                row = {"bench": "conv2d", "impl": setting, "device": device_name, "shape": label(s),
                       "pass": pass_name, "median_ms": round(ms, 4),
                       "gflops": round(forward_flops(s) * mult / (ms * 1e6), 1)}
                rows.append(row)
    return device_name, rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minidet-json", help="JSON lines written by bench_conv2d --json")
    parser.add_argument("--minidet-bin", help="bench_conv2d executable: run it first (GPU part) and compare")
    parser.add_argument("--reps", type=int, default=100)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("== PyTorch: SKIPPED (torch is not installed) ==")
        return 0
    if not torch.cuda.is_available():
        print("== PyTorch GPU: SKIPPED (no CUDA device) ==")
        return 0
    if args.minidet_bin:
        import subprocess
        import tempfile
        args.minidet_json = args.minidet_json or tempfile.mktemp(suffix=".json")
        subprocess.run([args.minidet_bin, "--skip-cpu", "--gpu-reps", str(max(args.reps, 50)), "--json",
                        args.minidet_json], check=True)
    device_name, rows = run_torch(torch, max(args.reps, 50))
    print(f"== PyTorch {torch.__version__} cuDNN {torch.backends.cudnn.version()} on {device_name}, "
          f"median of {max(args.reps, 50)} ==")
    print(f"{'impl':<12} {'shape':<30} {'pass':<8} {'median_ms':>10} {'GFLOP/s':>9}")
    for r in rows:
        print(f"{r['impl']:<12} {r['shape']:<30} {r['pass']:<8} {r['median_ms']:>10.4f} {r['gflops']:>9.1f}")
    for r in rows:
        print(json.dumps(r))
    if not args.minidet_json:
        return 0
    minidet = {}
    with open(args.minidet_json) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("bench") == "conv2d" and r.get("device", "").startswith("cuda"):
                if r["device"] != device_name:
                    print(f"warning: minidet ran on {r['device']}, PyTorch on {device_name}", file=sys.stderr)
                minidet[(r["shape"], r["pass"])] = r["median_ms"]
    if not minidet:
        print(f"no minidet GPU rows in {args.minidet_json}: run bench_conv2d on a GPU with --json", file=sys.stderr)
        return 1
    torch_ms = {(r["impl"], r["shape"], r["pass"]): r["median_ms"] for r in rows}
    print("\n== ratio minidet / PyTorch (median ms; > 1 means minidet is slower) ==")
    print(f"{'shape':<30} {'pass':<8} {'minidet':>9} {'torch-fp32':>10} {'ratio':>6} {'torch-tf32':>10} {'ratio':>6}")
    for s in SHAPES:
        for pass_name in ("fwd", "fwd+bwd"):
            key = (label(s), pass_name)
            if key not in minidet:
                continue
            m, fp32, tf32 = minidet[key], torch_ms[("torch-fp32",) + key], torch_ms[("torch-tf32",) + key]
            print(f"{label(s):<30} {pass_name:<8} {m:>9.4f} {fp32:>10.4f} {m / fp32:>6.2f} {tf32:>10.4f} {m / tf32:>6.2f}")
            print(json.dumps({"bench": "conv2d_ratio", "device": device_name, "shape": label(s), "pass": pass_name,
                              "minidet_ms": m, "torch_fp32_ms": fp32, "torch_tf32_ms": tf32,
                              "ratio_fp32": round(m / fp32, 3), "ratio_tf32": round(m / tf32, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
