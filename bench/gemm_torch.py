#!/usr/bin/env python3
"""torch.matmul on the CPU at bench_gemm's products and threads, for the minidet/PyTorch ratio.

    python3 bench/gemm_torch.py --minidet-bin build/release/bench/bench_gemm   # runs both
    python3 bench/gemm_torch.py --minidet-json FILE   # FILE from: bench_gemm --json FILE

float32, the operands laid out as bench_gemm lays them (T: a transposed view of stored data), torch.matmul
into a preallocated output; time.perf_counter around each run, one warm-up, the median of --cpu-reps runs, on
one thread and on --threads (PyTorch's BLAS: MKL or OpenBLAS, whichever the build links). A CPU benchmark: it
needs no GPU.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_common import time_cpu_ms  # noqa: E402

# (batch, m, n, k, A transposed, B transposed), as in bench_gemm.cpp.
SHAPES = [(8, 128, 256, 1152, False, False), (3, 32, 4096, 288, False, False), (1, 1024, 6272, 256, False, False),
          (1, 256, 6272, 1024, True, False), (1, 1024, 256, 6272, False, True), (1, 128, 1152, 2048, False, True),
          (8, 1152, 256, 128, True, False), (1, 32, 288, 12288, False, True), (8, 64, 1024, 288, False, False),
          (3, 288, 4096, 32, True, False), (8, 32, 4096, 27, False, False)]


def label(batch, m, n, k, a_t, b_t):
    return f"b{batch} {m}x{n}x{k} {'T' if a_t else 'N'}{'T' if b_t else 'N'}"


def run_torch(torch, reps, threads):
    rows = []
    for batch, m, n, k, a_t, b_t in SHAPES:
        gen = torch.Generator().manual_seed(1)
        a = torch.randn(batch, k, m, generator=gen).transpose(1, 2) if a_t else torch.randn(batch, m, k, generator=gen)
        b = torch.randn(batch, n, k, generator=gen).transpose(1, 2) if b_t else torch.randn(batch, k, n, generator=gen)
        out = torch.empty(batch, m, n)
        for t in (1, threads):
            torch.set_num_threads(t)
            ms = time_cpu_ms(lambda: torch.matmul(a, b, out=out), reps)
            rows.append({"bench": "gemm", "impl": "torch", "device": "cpu", "shape": label(batch, m, n, k, a_t, b_t),
                         "pass": f"torch-{t}t", "median_ms": round(ms, 4),
                         "gflops": round(2.0 * batch * m * n * k / (ms * 1e6), 2)})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minidet-json", help="JSON lines written by bench_gemm --json")
    parser.add_argument("--minidet-bin", help="bench_gemm executable: run it first and compare")
    parser.add_argument("--cpu-reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--skip-cpu", action="store_true", help="time nothing (gpu-check.sh's GPU-only runs)")
    args = parser.parse_args()
    if args.skip_cpu:
        print("== PyTorch CPU GEMM: SKIPPED (--skip-cpu) ==")
        return 0
    try:
        import torch
    except ImportError:
        print("== PyTorch: SKIPPED (torch is not installed) ==")
        return 0
    if args.minidet_bin:
        args.minidet_json = args.minidet_json or tempfile.mktemp(suffix=".json")
        subprocess.run([args.minidet_bin, "--cpu-reps", str(args.cpu_reps), "--threads", str(args.threads),
                        "--json", args.minidet_json], check=True)
    rows = run_torch(torch, args.cpu_reps, args.threads)
    print(f"== PyTorch {torch.__version__} on the CPU, median of {args.cpu_reps} ==")
    for r in rows:
        print(json.dumps(r))
    if not args.minidet_json:
        return 0
    minidet = {}
    with open(args.minidet_json) as f:
        for line in f:
            r = json.loads(line) if line.strip() else {}
            if r.get("bench") == "gemm" and r.get("pass", "").startswith("minidet-"):
                minidet[(r["shape"], r["pass"].split("-")[1])] = r["median_ms"]
    print("\n== ratio minidet / PyTorch (median ms; < 1 means minidet is faster) ==")
    print(f"{'product':<28} {'threads':>7} {'minidet':>9} {'torch':>9} {'ratio':>6}")
    for r in rows:
        threads = r["pass"].split("-")[1]
        m = minidet.get((r["shape"], threads))
        if m is None:
            continue
        print(f"{r['shape']:<28} {threads:>7} {m:>9.3f} {r['median_ms']:>9.3f} {m / r['median_ms']:>6.2f}")
        print(json.dumps({"bench": "gemm_ratio", "device": "cpu", "shape": r["shape"], "pass": threads,
                          "minidet_ms": m, "torch_ms": r["median_ms"], "ratio": round(m / r["median_ms"], 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
