// RotatedBox: an oriented box in image pixels, the rotated twin of data/box/box.h, and the measures that
// datasets, transforms and evaluation share.
//
// A rotated box is (cx, cy, w, h, angle), the convention of docs/rotated.md and ops/box_iou_rotated: the
// centre; the width along the box's own x axis, which points along (cos a, -sin a); the height along its y
// axis (sin a, cos a); the angle a in radians, counter-clockwise on screen (image y points down). Its corners:
//
//   (cx, cy) ± (w/2)(cos a, -sin a) ± (h/2)(sin a, cos a)
//
// A box turned by pi is the same box; normalized() maps the angle into [-pi/2, pi/2) with the one rule of
// ops/box_iou_rotated/rotated_box_math.h (normalize_angle), which the model's coder uses too. Width and height
// are never swapped.
//
//   rotated_box_iou(a, b)       = |a ∩ b| / (|a| + |b| - |a ∩ b|)    by convex clipping, the arithmetic of
//                                 ops/box_iou_rotated, so evaluation measures boxes as the detector does
//   rotated_intersection_area   |a ∩ b|, the same clip (and the same floor: rounding noise counts as 0)
//   rotated_crowd_overlap(d, g) = |d ∩ g| / |d|, the rotated twin of crowd_overlap (data/box/box.h): how
//                                 much of detection d lies in crowd region g; 0 when |d| = 0
//   bounding_box(r)             the smallest axis-aligned Box holding r's four corners
//   from_axis_aligned(b)        (centre, width, height, 0): the same region as a rotated box
// Files store the angle in degrees (detectron2's XYWHA, data/coco/coco_format.h); here it is always radians.
#pragma once

#include <ostream>
#include <vector>

#include "core/tensor.h"
#include "data/box/box.h"

namespace minidet::data {

struct RotatedBox {
  double cx = 0, cy = 0, w = 0, h = 0, angle = 0;

  double area() const { return w > 0 && h > 0 ? w * h : 0.0; }  // 0 for a degenerate box, never negative
  // The four corners in the order of ops/box_iou_rotated (counter-clockwise on screen): c - u - v, c + u - v,
  // c + u + v, c - u + v, with u = (w/2)(cos a, -sin a) and v = (h/2)(sin a, cos a); as {x0, y0, x1, y1, ...}.
  std::vector<double> corners() const;
  // The same box with its angle in [-pi/2, pi/2).
  RotatedBox normalized() const;

  bool operator==(const RotatedBox& other) const {
    return cx == other.cx && cy == other.cy && w == other.w && h == other.h && angle == other.angle;
  }
  bool operator!=(const RotatedBox& other) const { return !(*this == other); }
};

double rotated_box_iou(const RotatedBox& a, const RotatedBox& b);
double rotated_intersection_area(const RotatedBox& a, const RotatedBox& b);
double rotated_crowd_overlap(const RotatedBox& detection, const RotatedBox& crowd_region);
Box bounding_box(const RotatedBox& box);
RotatedBox from_axis_aligned(const Box& box);
// All five values finite.
bool is_finite(const RotatedBox& box);

// (M, 5) rows (cx, cy, w, h, a), float32 by default: the form box_iou_rotated and a rotated detector read.
Tensor rotated_boxes_tensor(const std::vector<RotatedBox>& boxes, const TensorOptions& options = {});

std::ostream& operator<<(std::ostream& out, const RotatedBox& box);

}  // namespace minidet::data
