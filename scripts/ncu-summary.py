#!/usr/bin/env python3
"""Sums an ncu CSV by kernel: where a training step's GPU time goes, and the floor under it.

    ncu --launch-skip 20000 --launch-count 2500 --csv --cache-control none \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,... \
        minidet train --device cuda ... > kernels.csv
    python3 scripts/ncu-summary.py kernels.csv [--top 25] [--dram-tbs 4.8 --fp32-tflops 66.9]
    python3 scripts/ncu-summary.py --self-test   # the sums on a made-up CSV (a ctest case)

scripts/gpu-check.sh's `profile` part runs both. ncu serialises the kernels, so the times are upper bounds
(a few microseconds more per small kernel than in a real run); the counts and the ranking are what matter.

The floor. Given the metrics of FLOOR_METRICS, each kernel also gets its minimal time: the longer of its DRAM
traffic at the GPU's peak bandwidth and its FP32 operations (an FFMA counts 2) at the GPU's peak FP32 rate,
the two roofs of the roofline model (Williams, Waterman and Patterson, CACM 2009). That is what the same
work would take on an ideal machine, with no latency, launch or occupancy cost; the sum over the kernels is
the floor of the step for this sequence of kernels. No kernel is shorter than a launch, though: "floor with
launches" counts each kernel at least as long as the shortest kernel of the profile (a launch's fixed cost as
ncu sees it), which is what a step of this many kernels cannot go under. "busiest unit" is a second, looser view from ncu's own
speed-of-light figures: each kernel's time scaled by the higher of its compute and memory throughput (in
% of peak), i.e. its time had its busiest unit run at 100%. With --cache-control none the DRAM bytes are
those of a run with a warm L2, as in a real step.
"""
import argparse
import collections
import csv
import sys

UNIT_TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
UNIT_TO_BYTES = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}
FLOP_METRICS = {  # metric: FLOPs per thread instruction
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 2,
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 1,
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": 1,
}
BYTE_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum")
SOL_METRICS = ("sm__throughput.avg.pct_of_peak_sustained_elapsed",
               "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed")
FLOOR_METRICS = ",".join(("gpu__time_duration.sum",) + BYTE_METRICS + tuple(FLOP_METRICS) + SOL_METRICS)


def number(text):
    return float(text.replace(",", "")) if text.strip() not in ("", "n/a") else 0.0


def read_launches(path):
    """One dict per launch: name and {metric: value in us, bytes, count or %}."""
    rows = list(csv.reader(open(path, newline="")))
    header_at = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if header_at is None:
        sys.exit(f"{path}: no ncu CSV header (a line starting with \"ID\"); did ncu run?")
    column = {name: j for j, name in enumerate(rows[header_at])}
    launches = collections.OrderedDict()
    for r in rows[header_at + 1:]:
        if len(r) < len(column):
            continue
        launch = launches.setdefault(r[column["ID"]], {"name": r[column["Kernel Name"]].split("(")[0][:90], "m": {}})
        metric, unit, value = r[column["Metric Name"]], r[column["Metric Unit"]], number(r[column["Metric Value"]])
        if unit in UNIT_TO_US:
            value *= UNIT_TO_US[unit]
        elif unit in UNIT_TO_BYTES:
            value *= UNIT_TO_BYTES[unit]
        launch["m"][metric] = value
    return list(launches.values())


def summarize(launches, dram_tbs, fp32_tflops, step_kernel):
    """Per kernel name and in total: launches, us, and with both peaks given the DRAM bytes, FLOPs and floors.
    Returns (per, total, steps, shortest, floor_on); steps counts step_kernel's ("NAME:N") launches."""
    floor_on = bool(launches) and dram_tbs > 0 and fp32_tflops > 0 and all(
        m in launches[0]["m"] for m in BYTE_METRICS + tuple(FLOP_METRICS))
    per = collections.defaultdict(collections.Counter)
    shortest = min((l["m"].get("gpu__time_duration.sum", 0.0) for l in launches), default=0.0)
    for launch in launches:
        m, k = launch["m"], per[launch["name"]]
        k["launches"] += 1
        k["us"] += m.get("gpu__time_duration.sum", 0.0)
        if floor_on:
            dram = sum(m[b] for b in BYTE_METRICS)
            flops = sum(m[f] * n for f, n in FLOP_METRICS.items())
            roof = max(dram / (dram_tbs * 1e6), flops / (fp32_tflops * 1e6))  # bytes / (bytes per us)
            k["bytes"] += dram
            k["flops"] += flops
            k["floor_us"] += roof
            k["launch_floor_us"] += max(roof, shortest)
            k["busiest_us"] += m.get("gpu__time_duration.sum", 0.0) * max(m.get(s, 0.0) for s in SOL_METRICS) / 100
    name, _, n = step_kernel.rpartition(":")
    steps = sum(k["launches"] for kernel, k in per.items() if name in kernel) / float(n)
    total = {key: sum(k[key] for k in per.values())
             for key in ("us", "launches", "bytes", "flops", "floor_us", "launch_floor_us", "busiest_us")}
    return per, total, steps, shortest, floor_on


def self_test():
    """A CSV written here with known metrics (ncu's layout, several units, thousands separators) must give
    the floors worked out by hand. Peaks of 1 TB/s and 1 TFLOP/s make a byte and a FLOP cost 1e-6 us."""
    import os
    import tempfile
    header = ["ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"]
    kernels = [  # name, duration (unit, value), read bytes, write bytes, ffma, fadd, fmul, sm %, memory %
        ("void gather<float>(int)", ("msecond", "0.02"), ("Mbyte", "4"), ("byte", "1,000,000"), 0, 0, 0, 10, 50),
        ("gemm_kernel", ("nsecond", "8,000"), ("byte", "1000000"), ("byte", "0"), 1_500_000, 500_000, 500_000, 80, 20),
        ("void nn::adam_many_kernel<float>(long)", ("usecond", "1"), ("byte", "0"), ("byte", "0"), 0, 0, 0, 0, 0),
        ("void nn::adam_many_kernel<float>(long)", ("usecond", "1"), ("byte", "0"), ("byte", "0"), 0, 0, 0, 0, 0),
    ]
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "kernels.csv")
        with open(path, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["==PROF== a line ncu prints before the table"])
            out.writerow(header)
            launch = 0
            for _ in range(2):  # two training steps
                for name, duration, read, write, ffma, fadd, fmul, sm, mem in kernels:
                    values = [("gpu__time_duration.sum",) + duration, ("dram__bytes_read.sum",) + read,
                              ("dram__bytes_write.sum",) + write]
                    values += [(metric, "inst", f"{count:,}") for metric, count in
                               zip(FLOP_METRICS, (ffma, fadd, fmul))]
                    values += [(SOL_METRICS[0], "%", str(sm)), (SOL_METRICS[1], "%", str(mem))]
                    for metric, unit, value in values:
                        out.writerow([launch, name, metric, unit, value])
                    launch += 1
        per, total, steps, shortest, floor_on = summarize(read_launches(path), 1.0, 1.0, "adam_many_kernel:2")
    expected = {
        "steps": (steps, 2.0),
        "shortest launch, us": (shortest, 1.0),
        "time per step, us": (total["us"] / steps, 20 + 8 + 1 + 1),
        # gather: 5e6 bytes -> 5 us; gemm: 4e6 FLOPs (an FFMA is 2) against 1e6 bytes -> 4 us; AdamW: nothing
        "floor per step, us": (total["floor_us"] / steps, 5 + 4),
        "floor with launches per step, us": (total["launch_floor_us"] / steps, 5 + 4 + 1 + 1),
        # gather: 20 us at 50% -> 10; gemm: 8 us at 80% -> 6.4
        "busiest unit per step, us": (total["busiest_us"] / steps, 10 + 6.4),
        "gather's launches": (per["void gather<float>"]["launches"], 2),
    }
    failed = [f"{what}: {got} != {want}" for what, (got, want) in expected.items() if abs(got - want) > 1e-9]
    if not floor_on:
        failed.append("the floor was not computed")
    for line in failed:
        print("FAILED", line)
    print("ncu-summary self-test:", "FAILED" if failed else f"all {len(expected)} checks passed")
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", nargs="?")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--step-kernel", default="adam_many_kernel:2",
                        help="NAME:N, a kernel launched N times per training step: the launches' steps are counted "
                             "by it (AdamW's multi-tensor update by default)")
    parser.add_argument("--dram-tbs", type=float, default=0.0, help="peak DRAM bandwidth, TB/s (0: no floor)")
    parser.add_argument("--fp32-tflops", type=float, default=0.0, help="peak FP32 rate without tensor cores, TFLOP/s")
    parser.add_argument("--self-test", action="store_true", help="check the sums on a CSV made up here, then exit")
    parser.add_argument("--print-metrics", action="store_true", help="print the ncu --metrics list the floor needs, then exit")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if args.print_metrics:
        print(FLOOR_METRICS)
        return 0
    if not args.csv:
        parser.error("the CSV is required (or --self-test)")
    per, total, s, shortest, floor_on = summarize(read_launches(args.csv), args.dram_tbs, args.fp32_tflops,
                                                   args.step_kernel)
    if s == 0:
        s = 1.0
        print(f"no {args.step_kernel.rpartition(':')[0]} launch: totals are for all the launches, not per step")
    print(f"{total['launches']} kernels, {total['us'] / 1e3:.2f} ms of GPU time (ncu, serialised); "
          f"per step ({s:g} steps; the rows below too): {total['us'] / 1e3 / s:.3f} ms, {total['launches'] / s:.0f} launches")
    if floor_on:
        print(f"floor per step (DRAM at {args.dram_tbs:g} TB/s, FP32 at {args.fp32_tflops:g} TFLOP/s): "
              f"{total['floor_us'] / 1e3 / s:.3f} ms ({total['bytes'] / 1e6 / s:.1f} MB of DRAM traffic, "
              f"{total['flops'] / 1e9 / s:.2f} GFLOP)")
        print(f"floor with launches (no kernel under the shortest one, {shortest:.2f} us): "
              f"{total['launch_floor_us'] / 1e3 / s:.3f} ms; busiest unit at 100%: {total['busiest_us'] / 1e3 / s:.3f} ms")
        print(f"{'ms':>8} {'share':>6} {'launches':>8} {'floor ms':>8} {'busiest':>8} {'DRAM MB':>8} {'GFLOP':>7}  kernel")
    else:
        print(f"{'ms':>8} {'share':>6} {'launches':>8}  kernel")
    for name, k in sorted(per.items(), key=lambda kv: -kv[1]["us"])[: args.top]:
        row = f"{k['us'] / 1e3 / s:8.3f} {100 * k['us'] / total['us']:5.1f}% {k['launches'] / s:8.1f}"
        if floor_on:
            row += (f" {k['floor_us'] / 1e3 / s:8.3f} {k['busiest_us'] / 1e3 / s:8.3f} {k['bytes'] / 1e6 / s:8.1f}"
                    f" {k['flops'] / 1e9 / s:7.2f}")
        print(f"{row}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
