#!/usr/bin/env python3
"""Sums an ncu CSV (--metrics gpu__time_duration.sum --csv) by kernel: where a training step's GPU time goes.

    ncu --launch-skip 20000 --launch-count 2500 --metrics gpu__time_duration.sum --csv \
        minidet train --device cuda ... > kernels.csv
    python3 scripts/ncu-summary.py kernels.csv [--top 25]

ncu serialises the kernels and flushes the caches before each one, so the times are upper bounds (a few
microseconds more per small kernel than in a real run); the counts and the ranking are what matter.
scripts/gpu-check.sh's `profile` part runs both steps.
"""
import argparse
import collections
import csv
import sys

UNIT_TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    rows = list(csv.reader(open(args.csv, newline="")))
    header_at = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if header_at is None:
        sys.exit(f"{args.csv}: no ncu CSV header (a line starting with \"ID\"); did ncu run?")
    column = {name: j for j, name in enumerate(rows[header_at])}
    time_us = collections.defaultdict(float)
    launches = collections.Counter()
    for r in rows[header_at + 1:]:
        if len(r) < len(column) or r[column["Metric Name"]] != "gpu__time_duration.sum":
            continue
        name = r[column["Kernel Name"]].split("(")[0][:90]
        time_us[name] += float(r[column["Metric Value"]].replace(",", "")) * UNIT_TO_US[r[column["Metric Unit"]]]
        launches[name] += 1
    total = sum(time_us.values())
    print(f"{sum(launches.values())} kernels, {total / 1e3:.2f} ms of GPU time (ncu, serialised)")
    print(f"{'ms':>8} {'share':>6} {'launches':>8}  kernel")
    for name, t in sorted(time_us.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"{t / 1e3:8.3f} {100 * t / total:5.1f}% {launches[name]:8d}  {name}")


if __name__ == "__main__":
    main()
