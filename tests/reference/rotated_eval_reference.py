#!/usr/bin/env python3
"""minidet's rotated evaluation against an independent re-implementation on shapely's polygon areas.

Writes hand-made scenes as COCO files with detectron2's rotated bbox [cx, cy, w, h, angle in degrees]
(identical boxes, boxes turned by small angles around the IoU thresholds, duplicates, a missed object,
several classes, crowd regions, images without detections or without objects, the COCO area ranges, more
than 100 detections in an image, axis-aligned results against rotated ground truth and the reverse, and a
random scene), runs rotated_eval_print (minidet's VOC and COCO numbers at full precision, read from the
same files) and scores each scene again with detection_eval.py: pycocotools' COCOeval and minidet's VOC
rule rewritten in plain Python, the overlap measured on shapely's polygons through the corners of the
convention, (cx, cy) +- (w/2)(cos a, -sin a) +- (h/2)(sin a, cos a), a = radians(degrees). Overlap is
rotated when either file is (detectron2's RotatedCOCOeval.compute_iou_dt_gt); a 4-number box is
[x, y, w, h] at angle 0.

Fails (exit 1, naming the scene and the number) if any |minidet - reference| > 1e-6. Every overlap that
decides a match is first checked to lie at least 1e-9 away from every threshold, so that the rounding of
two different polygon clippers cannot flip a decision and the comparison is meaningful.

Without shapely it prints "skipped: python3-shapely not installed" and exits 0 (CTest marks it skipped).

    rotated_eval_reference.py --print build/cpu/tests/rotated_eval_print --work /tmp/rotated_eval
"""

import json
import os
import random
import subprocess
import sys

import reference_common
from detection_eval import IOU_THRESHOLDS, VOC_THRESHOLD, evaluate_coco, evaluate_voc, overlap

TOLERANCE = 1e-6
MARGIN = 1e-9


# ---- scenes ------------------------------------------------------------------------------------------

class Scene:
    def __init__(self, name, width=128, height=128, categories=(1,)):
        self.name = name
        self.width, self.height = width, height
        self.data = {"images": [], "categories": [{"id": c, "name": "class%d" % c} for c in categories],
                     "annotations": [], "results": []}

    def image(self, image_id):
        self.data["images"].append({"id": image_id, "file_name": "%d.png" % image_id, "width": self.width,
                                    "height": self.height})

    def object(self, image_id, bbox, category=1, crowd=False, area=True):
        """area=False leaves "area" out of the file; minidet then takes w * h, as the reference does."""
        self.data["annotations"].append({"id": len(self.data["annotations"]) + 1, "image_id": image_id,
                                         "category_id": category, "bbox": list(bbox), "iscrowd": 1 if crowd else 0,
                                         "area": bbox[2] * bbox[3], "_written_area": area})

    def detection(self, image_id, bbox, score, category=1):
        self.data["results"].append({"image_id": image_id, "category_id": category, "bbox": list(bbox),
                                     "score": score})


def turned(bbox, degrees):
    return (bbox[0], bbox[1], bbox[2], bbox[3], bbox[4] + degrees)


def moved(bbox, dx, dy):
    return (bbox[0] + dx, bbox[1] + dy) + tuple(bbox[2:])


def scenes():
    out = []

    s = Scene("identical", categories=(1, 2))
    for image_id in (1, 2, 3, 4):
        s.image(image_id)
    boxes = [(1, (30, 40, 40, 10, 17.0), 1), (1, (80, 80, 30, 30, -45.0), 2), (2, (60, 60, 50, 8, 89.5), 1),
             (3, (64, 64, 20, 60, -90.0), 2)]
    for n, (image_id, bbox, category) in enumerate(boxes):
        s.object(image_id, bbox, category)
        s.detection(image_id, turned(bbox, 180.0 if n % 2 else 0.0), 0.9 - 0.1 * n, category)  # +180: the same box
    out.append(s)  # image 4: neither objects nor detections

    s = Scene("small turns around the thresholds")
    for n, degrees in enumerate([1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 22, 26, 31, 38]):
        s.image(n + 1)
        bar = (64, 64, 48, 12, -30.0 + 7 * n)
        s.object(n + 1, bar)
        s.detection(n + 1, turned(bar, degrees if n % 2 else -degrees), 0.3 + 0.05 * ((n * 7) % 13))
        square = (30, 100, 24, 20, 10.0 * n)
        s.object(n + 1, square)
        s.detection(n + 1, moved(turned(square, 2.0 * n), 0.8 * n, -0.5 * n), 0.25 + 0.05 * ((n * 5) % 11))
    out.append(s)

    s = Scene("duplicates")
    for image_id in (1, 2):
        s.image(image_id)
    a, b, c = (40, 40, 50, 12, 25.0), (90, 90, 40, 16, -60.0), (60, 60, 30, 30, 5.0)
    s.object(1, a)
    s.object(1, b)
    s.object(2, c)
    s.detection(1, turned(a, 4), 0.6)     # the better one scores lower: the first taken wins
    s.detection(1, a, 0.5)
    s.detection(1, turned(b, -8), 0.9)
    s.detection(1, moved(b, 2, 1), 0.85)  # a duplicate of b
    s.detection(2, turned(c, 12), 0.7)
    s.detection(2, turned(c, 30), 0.65)
    out.append(s)

    s = Scene("missed object")
    s.image(1)
    s.image(2)
    for bbox in [(30, 30, 40, 10, 30.0), (90, 40, 20, 40, -15.0), (64, 100, 60, 14, 80.0)]:
        s.object(1 if bbox[0] < 60 else 2, bbox)
    s.detection(1, turned((30, 30, 40, 10, 30.0), 6), 0.8)
    s.detection(2, moved((90, 40, 20, 40, -15.0), 3, -2), 0.7)
    out.append(s)

    s = Scene("several classes", categories=(1, 2, 5, 7))
    for image_id in (1, 2, 3):
        s.image(image_id)
    s.object(1, (40, 40, 40, 12, 10.0), 1)
    s.object(1, (90, 80, 30, 30, -35.0), 2)
    s.object(2, (60, 60, 70, 10, 45.0), 5)
    s.object(3, (50, 70, 24, 48, -70.0), 2)
    s.detection(1, turned((40, 40, 40, 12, 10.0), 5), 0.9, 1)
    s.detection(1, (40, 40, 40, 12, 10.0), 0.95, 2)  # the right box with the wrong class
    s.detection(1, turned((90, 80, 30, 30, -35.0), 20), 0.6, 2)
    s.detection(2, turned((60, 60, 70, 10, 45.0), 3), 0.8, 5)
    s.detection(3, moved((50, 70, 24, 48, -70.0), 4, 4), 0.5, 2)
    s.detection(3, (20, 20, 10, 10, 0.0), 0.4, 7)  # class 7 has no objects at all
    out.append(s)

    s = Scene("crowd regions")
    for image_id in (1, 2):
        s.image(image_id)
    s.object(1, (64, 64, 100, 30, 20.0), crowd=True)
    s.object(1, (30, 110, 30, 10, -10.0))
    s.object(2, (60, 60, 40, 40, 45.0), crowd=True)
    s.object(2, (64, 64, 30, 8, 60.0))  # a regular object inside the crowd region
    s.detection(1, (70, 62, 30, 12, 20.0), 0.95)            # inside the crowd region: ignored
    s.detection(1, (20, 80, 40, 12, 20.0), 0.9)             # partly on it
    s.detection(1, turned((30, 110, 30, 10, -10.0), 6), 0.8)
    s.detection(2, turned((64, 64, 30, 8, 60.0), 4), 0.85)  # the regular object wins over the crowd
    s.detection(2, (50, 50, 14, 14, 10.0), 0.7)             # on the crowd only
    out.append(s)

    s = Scene("images without detections or objects")
    for image_id in (1, 2, 3, 4, 5):
        s.image(image_id)
    s.object(1, (40, 40, 40, 12, 10.0))
    s.object(2, (70, 70, 50, 20, -40.0))
    s.object(3, (60, 30, 30, 10, 75.0))
    s.detection(1, turned((40, 40, 40, 12, 10.0), 2), 0.9)
    s.detection(4, (60, 60, 30, 30, 12.0), 0.95)  # an image without objects: a false positive
    s.detection(4, (30, 30, 20, 10, -12.0), 0.2)
    out.append(s)  # images 2 and 3: objects but no detection; image 5: nothing

    s = Scene("area ranges", width=400, height=400)
    for image_id in (1, 2):
        s.image(image_id)
    # w * h against the bounding box's area: 30 x 30 at 45 degrees is small (900) with a medium bounding box
    # (1800); 90 x 90 at 45 degrees is medium (8100) with a large one (16200).
    for n, (bbox, area) in enumerate([((50, 50, 30, 30, 45.0), True), ((150, 60, 90, 90, 45.0), False),
                                      ((300, 300, 120, 100, -20.0), True), ((60, 300, 20, 6, 60.0), False),
                                      ((200, 200, 40, 30, 0.0), True)]):
        s.object(1 + n % 2, bbox, area=area)
        s.detection(1 + n % 2, turned(bbox, 3 + 2 * n), 0.9 - 0.1 * n)
    s.detection(1, (300, 100, 10, 10, 30.0), 0.85)  # unmatched, small
    s.detection(2, (300, 100, 50, 40, 30.0), 0.75)  # unmatched, medium
    s.detection(2, (100, 250, 110, 100, 30.0), 0.55)  # unmatched, large
    out.append(s)

    s = Scene("more than 100 detections in an image")
    s.image(1)
    s.image(2)
    rng = random.Random(7)
    bars = [(20 + 28 * (n % 4), 20 + 28 * (n // 4), 20, 8, rng.uniform(-90, 90)) for n in range(12)]
    for bar in bars:
        s.object(1, bar)
    for n in range(150):
        bar = bars[n % 12]
        s.detection(1, moved(turned(bar, rng.uniform(-25, 25)), rng.uniform(-3, 3), rng.uniform(-3, 3)), rng.random())
    s.object(2, (64, 64, 40, 20, 30.0))
    s.detection(2, (64, 64, 40, 20, 33.0), 0.5)
    out.append(s)

    s = Scene("axis-aligned results against rotated ground truth")
    s.image(1)
    s.image(2)
    s.object(1, (40, 40, 40, 20, 0.0))
    s.object(1, (90, 90, 40, 20, 30.0))
    s.object(2, (64, 64, 60, 20, -60.0))
    s.detection(1, (20, 30, 40, 20), 0.9)          # the first object exactly, as [x, y, w, h]
    s.detection(1, (70, 75, 40, 30), 0.8)
    s.detection(2, (40, 40, 48, 50), 0.7)
    out.append(s)

    s = Scene("rotated results against axis-aligned ground truth")
    s.image(1)
    s.object(1, (10, 10, 60, 30))
    s.object(1, (60, 70, 40, 40))
    s.detection(1, (40, 25, 60, 30, 8.0), 0.9)
    s.detection(1, (80, 90, 40, 40, 45.0), 0.8)   # the square turned: IoU 0.707, its bounding box 0.5
    out.append(s)

    s = Scene("random", width=160, height=160, categories=(1, 2, 3))
    rng = random.Random(20240611)
    for image_id in range(1, 9):
        s.image(image_id)
        for _ in range(rng.randint(0, 5)):
            category = rng.randint(1, 3)
            box = (rng.uniform(20, 140), rng.uniform(20, 140), rng.uniform(6, 70), rng.uniform(4, 40),
                   rng.uniform(-90, 90))
            crowd = rng.random() < 0.08
            s.object(image_id, box, category, crowd=crowd, area=rng.random() < 0.8)
            for _ in range(rng.choice([0, 1, 1, 1, 2])):
                jitter = (rng.gauss(0, 3), rng.gauss(0, 3), box[2] * rng.uniform(0.8, 1.25),
                          box[3] * rng.uniform(0.8, 1.25), box[4] + rng.gauss(0, 8))
                s.detection(image_id, (box[0] + jitter[0], box[1] + jitter[1]) + jitter[2:], rng.random(),
                            category if rng.random() < 0.9 else rng.randint(1, 3))
        for _ in range(rng.randint(0, 2)):
            s.detection(image_id, (rng.uniform(10, 150), rng.uniform(10, 150), rng.uniform(5, 50),
                                   rng.uniform(5, 50), rng.uniform(-90, 90)), rng.random(), rng.randint(1, 3))
    out.append(s)
    return out


def check_margins(scene):
    """Every overlap a decision reads must stay MARGIN away from the thresholds it is compared with."""
    thresholds = IOU_THRESHOLDS + [VOC_THRESHOLD]
    for d in scene.data["results"]:
        for o in scene.data["annotations"]:
            if o["image_id"] != d["image_id"] or o["category_id"] != d["category_id"]:
                continue
            value = overlap(d, o)
            for threshold in thresholds:
                if abs(value - threshold) < MARGIN:
                    return "an overlap of %.17g lies within %g of the threshold %g: move the case" % (
                        value, MARGIN, threshold)
    return None


def write_files(scene, folder):
    os.makedirs(folder, exist_ok=True)
    annotations = []
    for o in scene.data["annotations"]:
        written = {k: v for k, v in o.items() if k != "_written_area"}
        if not o["_written_area"]:
            del written["area"]
        annotations.append(written)
    gt = {"images": scene.data["images"], "categories": scene.data["categories"], "annotations": annotations}
    gt_path, results_path = os.path.join(folder, "gt.json"), os.path.join(folder, "results.json")
    with open(gt_path, "w") as f:
        json.dump(gt, f)  # json writes floats with repr: the exact float64, read back exactly
    with open(results_path, "w") as f:
        json.dump(scene.data["results"], f)
    return gt_path, results_path


def expected_numbers(scene):
    stats, per_category = evaluate_coco(scene.data)
    numbers = {"coco_stats %d" % i: v for i, v in enumerate(stats)}
    numbers.update({"coco_category %d" % c: v for c, v in per_category.items()})
    for eleven, rule in ((False, "all"), (True, "11")):
        aps, mean = evaluate_voc(scene.data, eleven)
        numbers.update({"voc %s %d" % (rule, c): v for c, v in aps.items()})
        numbers["voc_map %s" % rule] = mean
    return numbers


def printed_numbers(text):
    numbers, rotated = {}, None
    for line in text.splitlines():
        words = line.split()
        if words[0] == "rotated_iou":
            rotated = words[1] == "1"
        elif words[0] == "coco_stats":
            numbers.update({"coco_stats %d" % i: float(v) for i, v in enumerate(words[1:])})
        else:
            numbers[" ".join(words[:-1])] = float(words[-1])
    return numbers, rotated


def main():
    args = reference_common.arguments_or_skip(__doc__, "rotated_eval_print", "a folder for the scenes' files")
    if args is None:
        return 0

    worst, worst_where, failed = 0.0, "", False
    for scene in scenes():
        problem = check_margins(scene)
        if problem:
            print("scene '%s': %s" % (scene.name, problem))
            return 1
        folder = os.path.join(args.work, scene.name.replace(" ", "_"))
        gt_path, results_path = write_files(scene, folder)
        run = subprocess.run([args.printer, gt_path, results_path], capture_output=True, text=True)
        if run.returncode != 0:
            print("scene '%s': rotated_eval_print failed (exit %d):\n%s" % (scene.name, run.returncode, run.stderr))
            return 1
        got, rotated = printed_numbers(run.stdout)
        expected = expected_numbers(scene)
        if rotated is not True:
            print("scene '%s': minidet did not measure rotated IoU" % scene.name)
            failed = True
        if set(got) != set(expected):
            print("scene '%s': minidet printed %s, expected %s" % (scene.name, sorted(got), sorted(expected)))
            return 1
        scene_worst = 0.0
        for key, value in expected.items():
            diff = abs(got[key] - value)
            scene_worst = max(scene_worst, diff)
            if diff > worst:
                worst, worst_where = diff, "scene '%s', %s: minidet %.17g, reference %.17g" % (
                    scene.name, key, got[key], value)
            if diff > TOLERANCE:
                print("FAILED scene '%s', %s: minidet %.17g, reference %.17g" % (scene.name, key, got[key], value))
                failed = True
        print("%-52s %3d objects %4d detections  AP %.4f  AP50 %.4f  mAP(VOC) %.4f  max |diff| %.3g" % (
            scene.name, len(scene.data["annotations"]), len(scene.data["results"]), expected["coco_stats 0"],
            expected["coco_stats 1"], expected["voc_map all"], scene_worst))
    print("max |minidet - reference| = %.3g%s" % (worst, (" (" + worst_where + ")") if worst_where else ""))
    if failed:
        print("FAILED: a difference above %g, or an overlap that was not rotated" % TOLERANCE)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
