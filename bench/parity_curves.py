#!/usr/bin/env python3
"""Learning parity: minidet and the torchvision twin trained from the same initial weights on the same batches,
scored by the same evaluator, for several seeds; the mAP@0.5 and COCO AP curves side by side (docs/parity.md).

    python3 bench/parity_curves.py --build build/gpu --out /tmp/curves [--seeds 0 1 2 3 4] [--steps 750]
    python3 bench/parity_curves.py --out /tmp/all --merge /tmp/curves/curves.json /tmp/more/curves.json

Per seed s:
  1. the initial weights: parity_minidet --seed s --save-weights (the very weights `minidet train --seed s`
     starts from), converted for the twin by bench/torchvision_weights.py;
  2. minidet: `minidet train --seed s` on the default schedule, evaluated every --eval-every steps, once with
     RoIAlign as torchvision's box head runs it (detector.roi_heads.aligned=false) and once with minidet's
     default (aligned=true), to measure that difference;
  3. the twin: bench/detector_torch.py --time-to-accuracy on the same data (export_shapes_coco), replaying the
     aligned=false run's batches.jsonl (same images, order and flips) from the same weights, scored by
     `minidet eval --gt --results`, the evaluator of minidet's own evaluations.
What still differs between the two runs: the samplers' random draws (torch's generator, minidet's), and the
floating-point order of GPU sums. Writes curves.json, curves.svg and a summary table under --out.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
SIDES = (("minidet", "minidet, aligned=false (as torchvision)"), ("twin", "torchvision twin"),
         ("minidet_aligned", "minidet, aligned=true (its default)"))
COLOURS = {"minidet": "#d62728", "twin": "#1f77b4", "minidet_aligned": "#2ca02c"}


START = time.time()


def say(text):
    print(f"[{time.time() - START:6.1f} s] {text}", flush=True)


def run(command, log):
    say(f"start {os.path.basename(command[1] if command[0] == sys.executable else command[0])} -> {log}")
    with open(log, "w") as out:
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        with open(log) as f:
            tail = f.read()[-3000:]
        say(f"FAILED {log}")
        raise SystemExit(f"parity_curves: {' '.join(command)} failed ({result.returncode}):\n{tail}")


def minidet_curve(folder):
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return [(e["step"], e["map50"], e["coco_ap"]) for e in lines if e["type"] == "eval"]


def twin_curve(log):
    pattern = re.compile(r"^step\s+(\d+)\s+mAP@0\.5 ([0-9.]+)\s+COCO AP ([0-9.]+)")
    with open(log) as f:
        return [(int(m[1]), float(m[2]), float(m[3])) for m in map(pattern.match, f) if m]


def one_seed(args, seed, data):
    work = os.path.join(args.out, f"seed{seed}")
    os.makedirs(work, exist_ok=True)
    build = args.build
    init_ckpt, init_pt = os.path.join(work, "init.ckpt"), os.path.join(work, "init.pt")
    run([f"{build}/bench/parity_minidet", "--seed", str(seed), "--save-weights", init_ckpt, "--steps", "0",
         "--dtype", "float32", "--out", os.path.join(work, "init.dump")], os.path.join(work, "init.log"))
    run([sys.executable, os.path.join(HERE, "torchvision_weights.py"), "to-torch", init_ckpt, init_pt],
        os.path.join(work, "convert.log"))
    schedule = ["--set", f"schedule.eval_every={args.eval_every}", "--set", f"schedule.steps={args.steps}"]
    minidet = f"{build}/examples/minidet/minidet"
    runs = {"minidet": ["--set", "detector.roi_heads.aligned=false"], "minidet_aligned": []}
    for side, extra in runs.items():
        run([minidet, "train", "--seed", str(seed), "--out", os.path.join(work, side)] + schedule + extra,
            os.path.join(work, f"{side}.log"))
    twin_log = os.path.join(work, "twin.log")
    run([sys.executable, os.path.join(HERE, "detector_torch.py"), "--time-to-accuracy", "--target", "2",
         "--steps", str(args.steps), "--eval-every", str(args.eval_every), "--data", data,
         "--plan", os.path.join(work, "minidet", "batches.jsonl"), "--minidet-command", minidet,
         "--init", init_pt, "--seed", str(seed), "--device", args.device, "--results-dir", os.path.join(work, "twin-results")], twin_log)
    say(f"seed {seed} done")
    return {"minidet": minidet_curve(os.path.join(work, "minidet")), "twin": twin_curve(twin_log),
            "minidet_aligned": minidet_curve(os.path.join(work, "minidet_aligned"))}


def svg(curves, steps, path):
    """Two panels (mAP@0.5, COCO AP): each seed thin, the mean thick, one colour per side."""
    width, height, pad = 460, 300, 48
    panels = []
    for panel, (metric, title) in enumerate(((1, "mAP@0.5"), (2, "COCO AP@[0.5:0.95]"))):
        x0 = panel * width
        low = min(p[metric] for side in curves.values() for c in side for p in c)
        low = max(0.0, min(0.5, low))
        sx = lambda s: x0 + pad + (width - 1.5 * pad) * s / steps  # noqa: E731
        sy = lambda v: height - pad - (height - 1.7 * pad) * (v - low) / (1.0 - low)  # noqa: E731
        parts = [f'<text x="{x0 + width / 2}" y="18" text-anchor="middle" font-size="14">{title}</text>',
                 f'<line x1="{sx(0)}" y1="{sy(low)}" x2="{sx(steps)}" y2="{sy(low)}" stroke="#444"/>',
                 f'<line x1="{sx(0)}" y1="{sy(low)}" x2="{sx(0)}" y2="{sy(1.0)}" stroke="#444"/>']
        for k in range(6):
            v = low + (1.0 - low) * k / 5
            parts.append(f'<text x="{sx(0) - 6}" y="{sy(v) + 4}" text-anchor="end" font-size="10">{v:.2f}</text>')
            parts.append(f'<line x1="{sx(0)}" y1="{sy(v)}" x2="{sx(steps)}" y2="{sy(v)}" stroke="#ddd"/>')
        for k in range(0, steps + 1, max(1, steps // 5)):
            parts.append(f'<text x="{sx(k)}" y="{sy(low) + 14}" text-anchor="middle" font-size="10">{k}</text>')
        parts.append(f'<text x="{x0 + width / 2}" y="{height - 8}" text-anchor="middle" font-size="11">step</text>')
        for side, _ in SIDES:
            colour = COLOURS[side]
            for c in curves[side]:
                points = " ".join(f"{sx(p[0]):.1f},{sy(p[metric]):.1f}" for p in c)
                parts.append(f'<polyline fill="none" stroke="{colour}" stroke-opacity="0.25" points="{points}"/>')
            mean = mean_curve(curves[side], metric)
            points = " ".join(f"{sx(s):.1f},{sy(v):.1f}" for s, v in mean)
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2.5" points="{points}"/>')
        panels.append("\n".join(parts))
    legend = "\n".join(f'<rect x="{60 + 300 * i}" y="{height + 6}" width="14" height="4" fill="{COLOURS[s]}"/>'
                       f'<text x="{80 + 300 * i}" y="{height + 12}" font-size="11">{label}</text>'
                       for i, (s, label) in enumerate(SIDES))
    with open(path, "w") as f:
        f.write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * width}" height="{height + 24}" '
                f'font-family="sans-serif">\n<rect width="100%" height="100%" fill="white"/>\n'
                + "\n".join(panels) + "\n" + legend + "\n</svg>\n")


def mean_curve(runs, metric):
    steps = sorted({p[0] for c in runs for p in c})
    return [(s, statistics.mean(p[metric] for c in runs for p in c if p[0] == s)) for s in steps]


def paired(curves, side, metric, index=-1):
    """Per-seed differences side - twin at one evaluation: the seeds share weights and batches, so the pairs
    cancel most of the seed-to-seed spread. Returns the differences, their mean, standard deviation and a 95%
    interval of the mean (Student's t)."""
    diffs = [a[index][metric] - b[index][metric] for a, b in zip(curves[side], curves["twin"])]
    mean, sd = statistics.mean(diffs), statistics.stdev(diffs) if len(diffs) > 1 else 0.0
    # two-sided 97.5% quantiles of Student's t for 1..30 degrees of freedom (any table of t), then the normal's
    t = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
    half = (t[len(diffs) - 2] if len(diffs) - 1 <= len(t) else 1.960) * sd / len(diffs) ** 0.5 if len(diffs) > 1 else 0.0
    return diffs, mean, sd, (mean - half, mean + half)


def report(curves, seeds, steps, out):
    """curves.json, curves.svg and the tables: mean (min..max) per evaluation, then the paired differences."""
    with open(os.path.join(out, "curves.json"), "w") as f:
        json.dump({"seeds": seeds, "steps": steps, "curves": curves}, f)
    svg(curves, steps, os.path.join(out, "curves.svg"))
    print(f"== learning parity, seeds {seeds}: mean (min..max) over the seeds at each evaluation")
    print(f"{'step':>5} " + " ".join(f"{side + ' mAP@0.5':>30} {'COCO AP':>22}" for side, _ in SIDES))
    for i, (step, _, _) in enumerate(curves["minidet"][0]):
        cells = []
        for side, _ in SIDES:
            for metric in (1, 2):
                values = [c[i][metric] for c in curves[side] if i < len(c)]
                cells.append(f"{statistics.mean(values):.4f} ({min(values):.3f}..{max(values):.3f})")
        print(f"{step:>5} " + " ".join(f"{cells[2 * j]:>30} {cells[2 * j + 1]:>22}" for j in range(len(SIDES))))
    print(f"== at the last step, per seed against the twin (same weights, same batches)")
    for side in ("minidet", "minidet_aligned"):
        for metric, name in ((1, "mAP@0.5"), (2, "COCO AP")):
            diffs, mean, sd, (low, high) = paired(curves, side, metric)
            print(f"{side} - twin, {name}: {' '.join(f'{d:+.4f}' for d in diffs)}; mean {mean:+.4f}, sd {sd:.4f}, "
                  f"95% interval of the mean [{low:+.4f}, {high:+.4f}]")
    final = {side: statistics.mean(c[-1][1] for c in curves[side]) for side, _ in SIDES}
    print("mean mAP@0.5 at the last step: " + ", ".join(f"{side} {v:.4f}" for side, v in final.items()))
    print(json.dumps({"bench": "parity_curves", "seeds": seeds, "final_map50": final}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", help="a build folder (build/gpu) with examples/minidet/minidet, "
                        "examples/export_shapes_coco and bench/parity_minidet built")
    parser.add_argument("--out", required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--steps", type=int, default=750, help="minidet's default schedule.steps")
    parser.add_argument("--eval-every", type=int, default=50)
    parser.add_argument("--device", default="cuda", help="the twin's device (minidet picks the GPU when there is one)")
    parser.add_argument("--parallel", type=int, default=5, help="seeds trained side by side on the one GPU")
    parser.add_argument("--merge", nargs="+", metavar="CURVES_JSON",
                        help="train nothing: join the seeds of earlier runs' curves.json (same steps) and report them")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.merge:
        runs = [json.load(open(path)) for path in args.merge]
        if len({r["steps"] for r in runs}) != 1:
            raise SystemExit("parity_curves --merge: the runs have different step counts")
        curves = {side: [c for r in runs for c in r["curves"][side]] for side, _ in SIDES}
        report(curves, [s for r in runs for s in r["seeds"]], runs[0]["steps"], args.out)
        return
    if not args.build:
        raise SystemExit("parity_curves: --build is required unless --merge is given")
    data = os.path.join(args.out, "data")
    run([f"{args.build}/examples/export_shapes_coco", "--out", data, "--size", "128", "--train", "2000", "--test",
         "200", "--seed", "0"], os.path.join(args.out, "export.log"))
    with ThreadPoolExecutor(args.parallel) as pool:
        results = list(pool.map(lambda s: one_seed(args, s, data), args.seeds))
    report({side: [r[side] for r in results] for side, _ in SIDES}, args.seeds, args.steps, args.out)


if __name__ == "__main__":
    main()
