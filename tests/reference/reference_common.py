"""What the tests/reference/ scripts share: the rotated box's corners, their command line, and the visible
skip when shapely is missing (CTest marks a test skipped on the line "skipped: ...", tests/CMakeLists.txt)."""

import argparse
import math
import sys


def corners(box):
    """The corners of box (cx, cy, w, h, a), a in radians, in minidet's convention (docs/rotated.md):
    (cx, cy) +- (|w|/2)(cos a, -sin a) +- (|h|/2)(sin a, cos a), in the order of ops/box_iou_rotated."""
    cx, cy, w, h, a = box
    c, s = math.cos(a), math.sin(a)
    hw, hh = abs(w) / 2, abs(h) / 2
    ux, uy = hw * c, -hw * s  # half the box's x axis
    vx, vy = hh * s, hh * c  # half the box's y axis
    return [(cx - ux - vx, cy - uy - vy), (cx + ux - vx, cy + uy - vy), (cx + ux + vx, cy + uy + vy),
            (cx - ux + vx, cy - uy + vy)]


def arguments_or_skip(doc, printer, work_help):
    """The script's --print (the minidet program it runs) and --work arguments, or None after printing the
    skip line when shapely cannot be imported."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--print", dest="printer", required=True, help="the %s program" % printer)
    parser.add_argument("--work", required=True, help=work_help)
    args = parser.parse_args()
    try:
        import shapely.geometry  # noqa: F401
    except ImportError:
        print("skipped: python3-shapely not installed (no module shapely for %s)" % sys.executable)
        return None
    return args
