"""VOC and COCO box evaluation re-implemented in plain Python on shapely's polygons, the judge of
rotated_eval_reference.py: written from the algorithms' descriptions, sharing no code with minidet.

A scene is a dict {"images", "categories", "annotations", "results"} as in COCO files (annotations with
their "area" filled in). A bbox of 5 numbers is a rotated box [cx, cy, w, h, angle in degrees], of 4 numbers
[x, y, w, h] at angle 0.

  overlap   IoU = |d & g| / (|d| + |g| - |d & g|) of the polygons through the corners of the convention
            (reference_common.corners); for a crowd region |d & g| / |d|.
  COCO      pycocotools' COCOeval (evaluate, evaluateImg, accumulate, summarize), rewritten: thresholds
            0.50:0.05:0.95, 101 recall points, maxDets 1/10/100, area ranges on the ground truth's "area"
            and on a result's bbox[2] * bbox[3] (as loadRes computes it).
  VOC       minidet's rule (data/eval/voc_eval.h): per class, detections by score (stable), each matched to
            the regular object of highest IoU, a true positive when > 0.5 and not yet taken; a detection
            matching no object but covering a crowd region (overlap > 0.5) is ignored; all-point and
            11-point AP.
"""

import math

from reference_common import corners

IOU_THRESHOLDS = [0.5 + i * ((0.95 - 0.5) / 9) for i in range(9)] + [0.95]  # numpy.linspace(.5, .95, 10)
RECALL_THRESHOLDS = [i * (1.0 / 100) for i in range(100)] + [1.0]  # numpy.linspace(0, 1, 101)
MAX_DETECTIONS = [1, 10, 100]
AREA_RANGES = [(0, 1e10), (0, 32 ** 2), (32 ** 2, 96 ** 2), (96 ** 2, 1e10)]
VOC_THRESHOLD = 0.5


# ---- geometry -----------------------------------------------------------------------------------------

def polygon(bbox):
    from shapely.geometry import Polygon
    if len(bbox) == 5:
        return Polygon(corners((bbox[0], bbox[1], bbox[2], bbox[3], math.radians(bbox[4]))))
    x, y, w, h = bbox
    return Polygon(corners((x + w / 2, y + h / 2, w, h, 0.0)))


def overlap(detection, obj):
    d, g = polygon(detection["bbox"]), polygon(obj["bbox"])
    inter = d.intersection(g).area
    if obj.get("iscrowd", 0):
        return inter / d.area if d.area > 0 else 0.0
    union = d.area + g.area - inter
    return inter / union if union > 0 else 0.0


# ---- COCO (pycocotools' COCOeval, rewritten) -----------------------------------------------------------

def stable_by_score(items):
    return sorted(items, key=lambda item: -item["score"])  # sorted() is stable, as mergesort


def evaluate_image(objects, detections, ious, area_range, max_det):
    if not objects and not detections:
        return None
    ignored = [1 if (o.get("iscrowd", 0) or not area_range[0] <= o["area"] <= area_range[1]) else 0
               for o in objects]
    order = sorted(range(len(objects)), key=lambda g: ignored[g])  # regular first, stable
    objects = [objects[g] for g in order]
    ignored = [ignored[g] for g in order]
    crowd = [o.get("iscrowd", 0) for o in objects]
    detections = detections[:max_det]  # already sorted by score
    T, G, D = len(IOU_THRESHOLDS), len(objects), len(detections)
    taken = [[False] * G for _ in range(T)]
    matched = [[0] * D for _ in range(T)]  # the matched object's id, 0 for none
    det_ignored = [[False] * D for _ in range(T)]
    if G > 0:
        for t, threshold in enumerate(IOU_THRESHOLDS):
            for d in range(D):
                best_iou, m = min(threshold, 1 - 1e-10), -1
                for g in range(G):
                    if taken[t][g] and not crowd[g]:
                        continue
                    if m > -1 and ignored[m] == 0 and ignored[g] == 1:
                        break
                    iou = ious[d][order[g]]
                    if iou < best_iou:
                        continue
                    best_iou, m = iou, g
                if m == -1:
                    continue
                det_ignored[t][d] = bool(ignored[m])
                matched[t][d] = objects[m]["id"]
                taken[t][m] = True
    for d, detection in enumerate(detections):
        bbox = detection["bbox"]
        area = bbox[2] * bbox[3]  # loadRes: a result's area is its bbox's w * h
        if area < area_range[0] or area > area_range[1]:
            for t in range(T):
                if matched[t][d] == 0:
                    det_ignored[t][d] = True
    return {"scores": [d["score"] for d in detections], "matched": matched, "ignored": det_ignored,
            "object_ignored": ignored}


def mean_valid(values):
    valid = [v for v in values if v > -1]
    return sum(valid) / len(valid) if valid else -1.0


def evaluate_coco(scene):
    image_ids = sorted(image["id"] for image in scene["images"])
    category_ids = sorted(category["id"] for category in scene["categories"])
    objects, detections = {}, {}
    for o in scene["annotations"]:
        objects.setdefault((o["image_id"], o["category_id"]), []).append(o)
    for d in scene["results"]:
        detections.setdefault((d["image_id"], d["category_id"]), []).append(d)
    sorted_detections, ious = {}, {}
    for i in image_ids:
        for c in category_ids:
            dts = stable_by_score(detections.get((i, c), []))[:MAX_DETECTIONS[-1]]
            sorted_detections[(i, c)] = dts
            ious[(i, c)] = [[overlap(d, o) for o in objects.get((i, c), [])] for d in dts]
    evals = {}
    for c in category_ids:
        for a, area_range in enumerate(AREA_RANGES):
            for i in image_ids:
                evals[(c, a, i)] = evaluate_image(objects.get((i, c), []), sorted_detections[(i, c)], ious[(i, c)],
                                                  area_range, MAX_DETECTIONS[-1])
    T, R, K, A, M = len(IOU_THRESHOLDS), len(RECALL_THRESHOLDS), len(category_ids), len(AREA_RANGES), len(MAX_DETECTIONS)
    precision = [[[[[-1.0] * M for _ in range(A)] for _ in range(K)] for _ in range(R)] for _ in range(T)]
    recall = [[[[-1.0] * M for _ in range(A)] for _ in range(K)] for _ in range(T)]
    for k, c in enumerate(category_ids):
        for a in range(A):
            for m, max_det in enumerate(MAX_DETECTIONS):
                E = [evals[(c, a, i)] for i in image_ids if evals[(c, a, i)] is not None]
                if not E:
                    continue
                pooled = [(e["scores"][d], e, d) for e in E for d in range(min(max_det, len(e["scores"])))]
                pooled = sorted(pooled, key=lambda p: -p[0])  # stable: images in increasing id order
                npig = sum(1 for e in E for ig in e["object_ignored"] if ig == 0)
                if npig == 0:
                    continue
                for t in range(T):
                    tp = fp = 0
                    rc, pr = [], []
                    for _, e, d in pooled:
                        if not e["ignored"][t][d]:
                            if e["matched"][t][d]:
                                tp += 1
                            else:
                                fp += 1
                        rc.append(tp / npig)
                        pr.append(tp / (fp + tp + 2.220446049250313e-16))  # np.spacing(1)
                    recall[t][k][a][m] = rc[-1] if rc else 0.0
                    for n in range(len(pr) - 1, 0, -1):
                        pr[n - 1] = max(pr[n - 1], pr[n])
                    for r, threshold in enumerate(RECALL_THRESHOLDS):
                        n = next((n for n, value in enumerate(rc) if value >= threshold), len(rc))  # searchsorted left
                        precision[t][r][k][a][m] = pr[n] if n < len(pr) else 0.0

    def ap(iou=None, a=0, m=2):
        return mean_valid([precision[t][r][k][a][m] for t in range(T) if iou is None or IOU_THRESHOLDS[t] == iou
                           for r in range(R) for k in range(K)])

    def ar(a=0, m=2):
        return mean_valid([recall[t][k][a][m] for t in range(T) for k in range(K)])

    stats = [ap(), ap(0.5), ap(0.75), ap(a=1), ap(a=2), ap(a=3), ar(m=0), ar(m=1), ar(), ar(a=1), ar(a=2), ar(a=3)]
    per_category = {c: mean_valid([precision[t][r][k][0][2] for t in range(T) for r in range(R)])
                    for k, c in enumerate(category_ids)}
    return stats, per_category


# ---- VOC (minidet's rule, data/eval/voc_eval.h) ------------------------------------------------------

def voc_ap(rec, prec, eleven):
    if eleven:
        return sum(max([p for r, p in zip(rec, prec) if r >= step * 0.1], default=0.0) for step in range(11)) / 11
    mrec, mpre = [0.0] + rec + [1.0], [0.0] + prec + [0.0]
    for i in range(len(mpre) - 1, 0, -1):
        mpre[i - 1] = max(mpre[i - 1], mpre[i])
    return sum((mrec[i] - mrec[i - 1]) * mpre[i] for i in range(1, len(mrec)) if mrec[i] != mrec[i - 1])


def evaluate_voc(scene, eleven):
    aps = {}
    for category in scene["categories"]:
        c = category["id"]
        by_image = {}
        for o in scene["annotations"]:
            if o["category_id"] == c:
                by_image.setdefault(o["image_id"], []).append(o)
        npos = sum(1 for o in scene["annotations"] if o["category_id"] == c and not o.get("iscrowd", 0))
        taken = set()
        tp = fp = 0
        rec, prec = [], []
        for d in stable_by_score([d for d in scene["results"] if d["category_id"] == c]):
            best, best_iou, covers = None, -1.0, False
            for o in by_image.get(d["image_id"], []):
                value = overlap(d, o)
                if o.get("iscrowd", 0):
                    covers = covers or value > VOC_THRESHOLD
                    continue
                if value > best_iou:
                    best, best_iou = o["id"], value
            if best is not None and best_iou > VOC_THRESHOLD:
                if best in taken:
                    fp += 1
                else:
                    tp += 1
                taken.add(best)
            elif covers:
                continue
            else:
                fp += 1
            prec.append(tp / (tp + fp))
            rec.append(tp / npos if npos > 0 else 0.0)
        aps[c] = voc_ap(rec, prec, eleven) if npos > 0 else -1.0
    valid = [ap for ap in aps.values() if ap > -1]
    return aps, (sum(valid) / len(valid) if valid else -1.0)
