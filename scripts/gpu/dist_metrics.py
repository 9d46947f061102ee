#!/usr/bin/env python3
"""The dist part's summary of one run's metrics.jsonl: images per second (the median of the logged windows
from step 100, and the mean over the same steps on the training clock), the last evaluation and the first
step at which mAP@0.5 reached 0.95.

    python3 scripts/gpu/dist_metrics.py RUN/metrics.jsonl IMAGES_PER_STEP
"""
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
train = [l for l in lines if l["type"] == "train"]
evals = [l for l in lines if l["type"] == "eval"]
rates = sorted(l["images_per_s"] for l in train if l["step"] >= 100)  # after warm-up; the median skips
if rates: print(f"  median images/s over the logged windows from step 100: {rates[len(rates) // 2]:.0f}")  # eval windows
# The windows' rates swing with the training state (how many proposals survive NMS): the mean rate over the
# same steps of both runs compares them better. From step 100 (or the last evaluation before it) to the last
# evaluation, on the training clock (train_s, which leaves evaluations out).
start = next(((l["step"], l["elapsed_s"]) for l in train if l["step"] == 100), (0, 0.0))
for e in evals:
  if e["step"] <= 100: start = (e["step"], e["train_s"])
if evals and evals[-1]["step"] > start[0]:
  end = evals[-1]
  rate = (end["step"] - start[0]) * int(sys.argv[2]) / (end["train_s"] - start[1])
  print(f"  mean images/s from step {start[0]} to {end['step']} on the training clock: {rate:.0f}")
hit = next((e for e in evals if e["map50"] >= 0.95), None)
for e in evals[-1:] + ([hit] if hit and hit is not evals[-1] else []):
  print(f"  eval at step {e['step']}: mAP@0.5 {e['map50']:.4f} COCO AP {e['coco_ap']:.4f} after {e['train_s']:.1f} s of training")
print("  mAP@0.5 >= 0.95 first at step", hit["step"] if hit else "never")
