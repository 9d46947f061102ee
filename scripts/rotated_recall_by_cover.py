#!/usr/bin/env python3
"""Recall of a rotated detector split by how much of each object lies on other objects.

For every ground-truth object of a rotated COCO file (detectron2's XYWHA boxes, angle in degrees), its
"cover" is the largest fraction of its area that lies inside another object of the same image. An object
is found when a detection of its class, with score >= --min-score, overlaps it at rotated IoU >= --iou.
The table gives, per class and per band of cover, how many objects there are and the fraction found.
Polygon areas come from shapely, through the geometry of tests/reference/detection_eval.py.

    export_shapes_coco --rotated --out /tmp/rotated128 --size 128 --train 0 --test 200
    minidet eval --checkpoint runs/rotated --out /tmp/results.json
    python3 scripts/rotated_recall_by_cover.py --gt /tmp/rotated128/test.json --results /tmp/results.json

--self-test exports a few images with export_shapes_coco (--export), scores the ground truth against
itself and against a copy with every bar turned a quarter turn, and checks the fractions.
"""
import argparse
import json
import os
import subprocess
import sys
from collections import defaultdict

# The rotated geometry of the tests' reference judge: polygons through minidet's corners, and their IoU.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from detection_eval import overlap, polygon  # noqa: E402

BANDS = ((0.0, 0.01, "alone (< 1%)"), (0.01, 0.5, "partly on another"), (0.5, 1.01, "mostly on another"))


def recall_by_cover(gt, results, min_iou=0.5, min_score=0.3):
    """{(category_id, band index): [objects, found]}."""
    objects, detections = defaultdict(list), defaultdict(list)
    for a in gt["annotations"]:
        objects[a["image_id"]].append((a, polygon(a["bbox"])))
    for d in results:
        if d["score"] >= min_score:
            detections[d["image_id"]].append(d)
    table = defaultdict(lambda: [0, 0])
    for image, items in objects.items():
        for k, (a, p) in enumerate(items):
            category = a["category_id"]
            cover = max((p.intersection(q).area / p.area for j, (_, q) in enumerate(items) if j != k), default=0.0)
            band = next(i for i, (lo, hi, _) in enumerate(BANDS) if lo <= cover < hi)
            found = any(d["category_id"] == category and overlap(d, dict(a, iscrowd=0)) >= min_iou
                        for d in detections[image])
            table[category, band][0] += 1
            table[category, band][1] += int(found)
    return table


def print_table(gt, table):
    names = {c["id"]: c["name"] for c in gt["categories"]}
    print(f"{'class':<12} {'cover':<20} {'objects':>7} {'found':>6}")
    for (category, band), (n, found) in sorted(table.items()):
        print(f"{names.get(category, category):<12} {BANDS[band][2]:<20} {n:>7} {found / n:>6.2f}")


def self_test(export, work):
    subprocess.run([export, "--rotated", "--out", work, "--size", "128", "--train", "0", "--test", "40"],
                   check=True, stdout=subprocess.DEVNULL)
    gt = json.load(open(os.path.join(work, "test.json")))
    exact = [{"image_id": a["image_id"], "category_id": a["category_id"], "bbox": a["bbox"], "score": 1.0}
             for a in gt["annotations"]]
    table = recall_by_cover(gt, exact)
    assert sum(n for n, _ in table.values()) == len(gt["annotations"])
    assert all(found == n for n, found in table.values()), table
    # A bar (at least 4 times longer than thick) turned a quarter turn about its centre overlaps itself at
    # IoU below 0.5; the other classes stay found.
    turned = [dict(d, bbox=d["bbox"][:4] + [d["bbox"][4] + 90.0]) if d["category_id"] == 3 else d for d in exact]
    table = recall_by_cover(gt, turned)
    for (category, _), (n, found) in table.items():
        assert found == (0 if category == 3 else n), (category, n, found)
    assert any(category == 3 for category, _ in table)
    print(f"self-test passed: {len(gt['annotations'])} objects in {len(gt['images'])} images")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gt", help="rotated COCO instances file")
    parser.add_argument("--results", help="rotated COCO results file")
    parser.add_argument("--iou", type=float, default=0.5, help="rotated IoU that finds an object")
    parser.add_argument("--min-score", type=float, default=0.3, help="detections from this score")
    parser.add_argument("--self-test", action="store_true")
    parser.add_argument("--export", help="with --self-test: the export_shapes_coco program")
    parser.add_argument("--work", default="/tmp/rotated_recall_by_cover", help="with --self-test: a folder")
    args = parser.parse_args()
    try:
        import shapely.geometry  # noqa: F401
    except ImportError:
        print("skipped: python3-shapely not installed")
        return 0
    if args.self_test:
        self_test(args.export, args.work)
        return 0
    if not args.gt or not args.results:
        parser.error("give --gt and --results (or --self-test)")
    gt = json.load(open(args.gt))
    print_table(gt, recall_by_cover(gt, json.load(open(args.results)), args.iou, args.min_score))
    return 0


if __name__ == "__main__":
    sys.exit(main())
