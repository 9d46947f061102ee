#!/usr/bin/env python3
"""box_iou_rotated against shapely: the honest judge of polygon areas.

Builds a deterministic set of rotated boxes (cx, cy, w, h, angle): every hard case of
ops/box_iou_rotated/box_iou_rotated.h (identical boxes, a square and its 45-degree turn, containment, shared
edges, touching corners, the angles 0, pi/2, pi, -pi/2, a +- pi, nearly parallel edges, zero-area and
negative sizes, far apart, large coordinates, long thin boxes) plus a few hundred random boxes from a fixed
seed. Writes them to a file, runs box_iou_rotated_print (minidet's CPU IoU matrix in float64, printed with
%.17g), computes every IoU again with shapely.geometry.Polygon (intersection area / union area) on the
corners of the convention

    corners = (cx, cy) +- (w/2)(cos a, -sin a) +- (h/2)(sin a, cos a)

and fails (exit 1, printing the worst pair) if any |minidet - shapely| > 1e-6. A box of zero area has IoU 0
with everything (minidet's policy; shapely's union of two empty polygons has area 0, so 0/0 is not asked).

Without shapely it prints "skipped: python3-shapely not installed" and exits 0 (CTest marks it skipped).

    box_iou_rotated_reference.py --print build/cpu/tests/box_iou_rotated_print --work /tmp/box_iou_rotated
"""

import math
import os
import random
import subprocess
import sys

import reference_common
from reference_common import corners

TOLERANCE = 1e-6
PI = math.pi


def neighbour(box, steps_u, steps_v):
    """The box next to `box` along its own axes (1, 0): shares an edge; (1, 1): touches a corner."""
    cx, cy, w, h, a = box
    c, s = math.cos(a), math.sin(a)
    return (cx + steps_u * w * c + steps_v * h * s, cy - steps_u * w * s + steps_v * h * c, w, h, a)


def hard_pairs():
    a = (0.0, 0.0, 4.0, 2.0, 0.3)
    pairs = [
        (a, a), (a, (0.0, 0.0, 4.0, 2.0, 0.3 + PI)), (a, (0.0, 0.0, 4.0, 2.0, 0.3 - PI)),
        ((0.0, 0.0, 2.0, 2.0, 0.0), (0.0, 0.0, 2.0, 2.0, PI / 4)),  # the octagon: IoU 1/sqrt(2)
        (a, (0.1, 0.2, 1.0, 0.5, 1.1)),  # inside a
        ((1.0, 1.0, 2.0, 2.0, 0.0), (3.0, 1.0, 2.0, 2.0, 0.0)),  # shared edge
        ((1.0, 1.0, 2.0, 2.0, 0.0), (3.0, 3.0, 2.0, 2.0, 0.0)),  # touching corner
        ((0.0, 0.0, 2.0, 4.0, PI / 2), (4.0, 0.0, 2.0, 4.0, PI / 2)),
        ((0.0, 0.0, math.sqrt(2), math.sqrt(2), PI / 4), (2.0, 0.0, math.sqrt(2), math.sqrt(2), PI / 4)),
        ((0.0, 0.0, 4.0, 2.0, 0.0), (0.0, 0.0, 2.0, 4.0, PI / 2)),
        ((0.0, 0.0, 4.0, 2.0, 0.0), (0.0, 0.0, 2.0, 4.0, -PI / 2)),
        ((0.0, 0.0, 4.0, 2.0, 0.0), (0.0, 0.0, 4.0, 2.0, PI)),
        ((0.0, 0.0, 4.0, 2.0, 0.0), (1.0, 0.0, 2.0, 4.0, PI / 2)),
        ((5.0, 5.0, 4.0, 2.0, 0.2), (5.5, 5.2, 4.0, 2.0, 0.2 + 1e-7)),  # nearly parallel
        ((5.0, 5.0, 4.0, 2.0, 0.2), (5.5, 5.2, 4.0, 2.0, 0.2 - 1e-7)),
        ((5.0, 5.0, 4.0, 2.0, 0.2), (9.0, 5.0, 4.0, 2.0, 0.2 + 1e-7)),
        ((0.0, 0.0, 1000.0, 1.0, 0.01), (0.0, 0.3, 1000.0, 1.0, 0.0100001)),  # long, thin, nearly parallel
        ((0.0, 0.0, 0.0, 2.0, 0.5), (0.0, 0.0, 0.0, 2.0, 0.5)),  # zero area
        ((0.0, 0.0, 3.0, 0.0, 0.5), (0.0, 0.0, 4.0, 2.0, 0.5)),
        ((0.0, 0.0, -4.0, 2.0, 0.7), (1.0, 0.5, 3.0, -3.0, -0.2)),  # negative sizes: |w|, |h|
        ((0.0, 0.0, 4.0, 2.0, 0.3), (1e4, -1e4, 4.0, 2.0, 0.3)),  # far apart
        ((12345.5, -6789.25, 40.0, 12.0, 0.9), (12350.25, -6785.5, 30.0, 20.0, -0.4)),  # large coordinates
        ((1e6 + 0.5, 1e6, 3.0, 2.0, 1.3), (1e6 + 1.5, 1e6 + 0.25, 3.0, 2.0, -1.0)),
    ]
    for angle in (0.4, 1.0, -0.7, PI / 4, 3.0, PI / 2, -PI / 2, PI):
        box = (0.0, 0.0, 3.0, 2.0, angle)
        for steps in ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, 1), (0.5, 0), (0, 0.25), (0.3, 0.7)):
            pairs.append((box, neighbour(box, *steps)))
    return pairs


def random_boxes(rng, count, span, offset=(0.0, 0.0)):
    return [(offset[0] + span * rng.random(), offset[1] + span * rng.random(), 1 + 25 * rng.random(),
             1 + 25 * rng.random(), -4 + 8 * rng.random()) for _ in range(count)]


def box_sets():
    """Two lists of boxes; the hard pairs sit at the same index k in both, the matrix covers every pair."""
    rng = random.Random(20240531)
    pairs = hard_pairs()
    first = [p[0] for p in pairs] + random_boxes(rng, 200, 30) + random_boxes(rng, 30, 30, (1e4, -1e4))
    second = [p[1] for p in pairs] + random_boxes(rng, 200, 30) + random_boxes(rng, 30, 30, (1e4, -1e4))
    return first, second


def main():
    args = reference_common.arguments_or_skip(__doc__, "box_iou_rotated_print", "a folder for the boxes file")
    if args is None:
        return 0
    from shapely.geometry import Polygon

    first, second = box_sets()
    os.makedirs(args.work, exist_ok=True)
    path = os.path.join(args.work, "boxes.txt")
    with open(path, "w") as f:
        f.write("%d %d\n" % (len(first), len(second)))
        for box in first + second:
            f.write(" ".join(repr(float(v)) for v in box) + "\n")  # repr: the exact float64, read back exactly
    run = subprocess.run([args.printer, path], capture_output=True, text=True)
    if run.returncode != 0:
        print("box_iou_rotated_print failed (exit %d):\n%s" % (run.returncode, run.stderr))
        return 1
    rows = [[float(v) for v in line.split()] for line in run.stdout.splitlines()]
    if len(rows) != len(first) or any(len(row) != len(second) for row in rows):
        print("box_iou_rotated_print printed %d rows, expected %d rows of %d" % (len(rows), len(first), len(second)))
        return 1

    polygons1 = [Polygon(corners(b)) for b in first]
    polygons2 = [Polygon(corners(b)) for b in second]
    worst, worst_pair, overlapping = -1.0, None, 0
    for i, p in enumerate(polygons1):
        for j, q in enumerate(polygons2):
            if p.area == 0 or q.area == 0:
                expected = 0.0
            else:
                inter = p.intersection(q).area
                expected = inter / p.union(q).area
            overlapping += expected > 0
            got = rows[i][j]
            diff = abs(got - expected) if not math.isnan(got) else math.inf
            if diff > worst:
                worst, worst_pair = diff, (i, j, got, expected)
    i, j, got, expected = worst_pair
    print("%d x %d pairs (%d hard pairs on the diagonal), %d overlapping: max |minidet - shapely| = %.3g"
          % (len(first), len(second), len(hard_pairs()), overlapping, worst))
    print("worst pair (%d, %d): boxes %r and %r, minidet %.17g, shapely %.17g" % (i, j, first[i], second[j], got,
                                                                                  expected))
    if worst > TOLERANCE:
        print("FAILED: |diff| above %g" % TOLERANCE)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
