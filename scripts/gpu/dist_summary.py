#!/usr/bin/env python3
"""The dist part's tables, from the runs' metrics.jsonl files.

    dist_summary.py throughput LABEL=RUN/metrics.jsonl:IMAGES_PER_STEP ...
        images per second of each run (mean from step 100 to the last evaluation, on the training clock, which
        leaves evaluations out; and the median of the logged windows), and each one's ratio to the first run
    dist_summary.py curves GROUP=RUN1/metrics.jsonl,RUN2/metrics.jsonl,... ...
        each group's mAP@0.5 at every evaluation: the mean over its runs (seeds) and the lowest and highest
"""
import json
import sys


def read(path):
  lines = [json.loads(l) for l in open(path)]
  return [l for l in lines if l["type"] == "train"], [l for l in lines if l["type"] == "eval"]


def rate(path, images):
  """(mean, median) images/s from step 100; the windows' rates swing with the training state (how many
  proposals survive NMS), so the mean over the same steps of every run compares them better."""
  train, evals = read(path)
  rates = sorted(l["images_per_s"] for l in train if l["step"] >= 100)
  median = rates[len(rates) // 2] if rates else float("nan")
  start = next(((l["step"], l["elapsed_s"]) for l in train if l["step"] == 100), (0, 0.0))
  for e in evals:
    if e["step"] <= 100: start = (e["step"], e["train_s"])
  end = evals[-1] if evals else None
  mean = (end["step"] - start[0]) * images / (end["train_s"] - start[1]) if end and end["step"] > start[0] else float("nan")
  return mean, median, end


def throughput(args):
  base = None
  print(f"  {'run':<24} {'images/s (mean)':>16} {'(median)':>9} {'x first':>8} {'last mAP@0.5':>13}")
  for arg in args:
    label, spec = arg.split("=", 1)
    path, images = spec.rsplit(":", 1)
    try:
      mean, median, end = rate(path, int(images))
    except (OSError, ValueError, KeyError) as e:
      print(f"  {label:<24} no metrics ({e})")
      continue
    base = base or mean
    print(f"  {label:<24} {mean:16.0f} {median:9.0f} {mean / base:8.2f} {end['map50'] if end else float('nan'):13.4f}")


def curves(args):
  groups = []
  for arg in args:
    label, paths = arg.split("=", 1)
    runs = []
    for path in paths.split(","):
      try:
        runs.append({e["step"]: e["map50"] for e in read(path)[1]})
      except OSError:
        pass
    groups.append((label, runs))
  steps = sorted({s for _, runs in groups for run in runs for s in run})
  print("  mAP@0.5 at each evaluation: mean over the seeds [lowest, highest]")
  print("  " + f"{'step':>5}" + "".join(f"  {label:>28}" for label, _ in groups))
  for step in steps:
    cells = []
    for _, runs in groups:
      values = [run[step] for run in runs if step in run]
      cells.append(f"{sum(values) / len(values):.3f} [{min(values):.3f}, {max(values):.3f}] n={len(values)}"
                   if values else "-")
    print("  " + f"{step:>5}" + "".join(f"  {c:>28}" for c in cells))


if __name__ == "__main__":
  {"throughput": throughput, "curves": curves}[sys.argv[1]](sys.argv[2:])
