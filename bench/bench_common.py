"""What every PyTorch twin script shares (bench/<op>_torch.py): the command line, the CUDA-event timing loop,
reading bench_<op>'s JSON lines, and the ratio table.

A twin script defines its workloads and a function that returns rows (dicts with at least bench, impl,
device, shape, pass, median_ms), then calls main(). Timing: 10 warm-up runs, then the median of --reps (>= 50)
runs, each between two CUDA events, as bench_common.h does for minidet. Rows may also carry per-run counts
(COUNT_FIELDS: kernel launches, host synchronisations, peak memory...); where both sides have one, a second
table compares them.
"""
import argparse
import json
import sys
import time


def median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])


def time_cpu_ms(fn, reps=3):
    """fn on the CPU: one warm-up run, then the median of `reps` runs, time.perf_counter around each, ms."""
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return median(times)


def time_stream_ms(torch, fn, calls, reps, warmup=10):
    """fn in streams of `calls` back-to-back calls, CUDA events around each stream, nothing waiting in between:
    ms per call, median of `reps` streams (bench_common.h's time_gpu_stream_ms: the throughput of a loop)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / calls)
    return median(times)


def time_median_ms(torch, fn, reps, warmup=10):
    """One call of fn from an idle GPU, CUDA events around it: its latency, ms, median of `reps`."""
    return time_stream_ms(torch, fn, 1, reps, warmup)


COUNT_FIELDS = ("launches", "syncs", "d2h", "h2d", "device_allocations", "peak_bytes")


def load_minidet_rows(path, benches):
    """{(bench, shape, pass): the whole JSON row} for the GPU rows of bench_<op>'s JSON file."""
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                r = json.loads(line)
                if r.get("bench") in benches and r.get("device", "").startswith("cuda"):
                    rows[(r["bench"], r["shape"], r["pass"])] = r
    return rows


def print_counts(minidet_rows, rows):
    """For each row with counts whose key minidet also measured, the counts side by side."""
    pairs = [(r, minidet_rows[(r["bench"], r["shape"], r["pass"])]) for r in rows
             if (r["bench"], r["shape"], r["pass"]) in minidet_rows]
    fields = [f for f in COUNT_FIELDS if any(f in r and f in m for r, m in pairs)]
    if not fields:
        return
    print("\n== counts per run, minidet / PyTorch (n/a: not measured) ==")
    print(f"{'bench':<16} {'shape':<34} {'pass':<12} " + " ".join(f"{f:>22}" for f in fields))
    for r, m in pairs:
        cells = []
        for f in fields:
            mine, theirs = m.get(f), r.get(f)
            if f == "peak_bytes":
                mine, theirs = [None if v is None else round(v / 2**20, 1) for v in (mine, theirs)]
            cells.append(f"{'n/a' if mine is None else mine} / {'n/a' if theirs is None else theirs}".rjust(22))
        print(f"{r['bench']:<16} {r['shape']:<34} {r['pass']:<12} " + " ".join(cells))


def load_minidet(path, benches, device_name):
    """{(bench, shape, pass): median_ms} for the GPU rows of bench_<op>'s JSON file."""
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("bench") in benches and r.get("device", "").startswith("cuda"):
                if r["device"] != device_name:
                    print(f"warning: minidet ran on {r['device']}, PyTorch on {device_name}", file=sys.stderr)
                # A time-to-accuracy row that never reached its target has no time to compare: None.
                rows[(r["bench"], r["shape"], r["pass"])] = None if r.get("reached") is False else r["median_ms"]
    return rows


def print_rows(rows):
    print(f"{'bench':<16} {'impl':<14} {'shape':<34} {'pass':<12} {'median_ms':>10}")
    for r in rows:
        print(f"{r['bench']:<16} {r['impl']:<14} {r['shape']:<34} {r['pass']:<12} {r['median_ms']:>10.4f}")
    for r in rows:
        print(json.dumps(r))


def print_ratios(minidet, rows, device_name):
    """For each minidet GPU row, the ratio minidet_ms / torch_ms against every impl timed on the same key."""
    print("\n== ratio minidet / PyTorch (median ms; < 1 means minidet is faster) ==")
    print(f"{'bench':<16} {'shape':<34} {'pass':<12} {'minidet':>9} {'impl':<14} {'torch':>9} {'ratio':>6}")
    for r in rows:
        key = (r["bench"], r["shape"], r["pass"])
        if key not in minidet:
            continue
        m, t = minidet[key], r["median_ms"]
        if m is None or r.get("reached") is False:
            missed = " and ".join(name for name, row_missed in (("minidet", m is None), (r["impl"], r.get("reached") is False))
                                  if row_missed)
            print(f"{r['bench']:<16} {r['shape']:<34} {r['pass']:<12} no ratio: {missed} never reached the target")
            continue
        print(f"{r['bench']:<16} {r['shape']:<34} {r['pass']:<12} {m:>9.4f} {r['impl']:<14} {t:>9.4f} {m / t:>6.2f}")
        print(json.dumps({"bench": r["bench"] + "_ratio", "device": device_name, "shape": r["shape"],
                          "pass": r["pass"], "impl": r["impl"], "minidet_ms": m, "torch_ms": t,
                          "ratio": round(m / t, 3)}))


def main(doc, benches, run_torch, add_arguments=None, minidet_bin_args=None):
    """benches: the bench names of bench_<op>'s rows to compare; run_torch(torch, reps) -> (device, rows).
    A twin with flags of its own passes add_arguments(parser); run_torch is then called as
    run_torch(torch, reps, args), and minidet_bin_args(args) lists what --minidet-bin should also pass."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minidet-json", help="JSON lines written by bench_<op> --json")
    parser.add_argument("--minidet-bin", help="bench_<op> executable: run it first (GPU part) and compare")
    parser.add_argument("--reps", type=int, default=100)
    if add_arguments:
        add_arguments(parser)
    args = parser.parse_args()
    reps = max(args.reps, 50)
    try:
        import torch
    except ImportError:
        print("== PyTorch: SKIPPED (torch is not installed) ==")
        return 0
    # A twin with a --device option may be asked to run on the CPU (detector_torch.py's time to accuracy).
    if not torch.cuda.is_available() and getattr(args, "device", "cuda") != "cpu":
        print("== PyTorch GPU: SKIPPED (no CUDA device) ==")
        return 0
    if args.minidet_bin:
        import subprocess
        import tempfile
        args.minidet_json = args.minidet_json or tempfile.mktemp(suffix=".json")
        extra = minidet_bin_args(args) if minidet_bin_args else []
        subprocess.run([args.minidet_bin, "--skip-cpu", "--gpu-reps", str(reps), "--json", args.minidet_json] + extra,
                       check=True)
    device_name, rows = run_torch(torch, reps, args) if add_arguments else run_torch(torch, reps)
    print(f"== PyTorch {torch.__version__} on {device_name}, median of {reps} ==")
    print_rows(rows)
    if not args.minidet_json:
        return 0
    minidet = load_minidet(args.minidet_json, benches, device_name)
    if not minidet:
        print(f"no minidet GPU rows in {args.minidet_json}: run bench_<op> on a GPU with --json", file=sys.stderr)
        return 1
    print_ratios(minidet, rows, device_name)
    print_counts(load_minidet_rows(args.minidet_json, benches), rows)
    return 0
