// Box: an axis-aligned box in image pixels, and the overlap measures that evaluation and the synthetic
// dataset share.
//
// Boxes are (x1, y1, x2, y2), continuous: pixel column c covers [c, c+1), so a box around the single
// pixel (3, 5) is (3, 5, 4, 6), and width = x2 - x1 with no "+1". COCO files store (x, y, w, h); the
// conversions below are the only place where the two meet.
//
//   IoU(a, b)           = |a ∩ b| / (|a| + |b| - |a ∩ b|)
//   crowd_overlap(d, g) = |d ∩ g| / |d|      (a detection inside a crowd region g counts as covered,
//                                              as in pycocotools' iou with iscrowd = 1)
// Both are 0 when the denominator is 0. Area, intersection and IoU are ops/boxes/box_math.h, the arithmetic
// the box ops and nms use, so evaluation measures boxes exactly as the detector does.
#pragma once

#include <ostream>

namespace minidet::data {

struct Box {
  double x1 = 0, y1 = 0, x2 = 0, y2 = 0;

  double width() const { return x2 - x1; }
  double height() const { return y2 - y1; }
  double area() const;  // 0 for an empty or inverted box, never negative

  static Box from_xywh(double x, double y, double w, double h) { return {x, y, x + w, y + h}; }
  bool operator==(const Box& other) const {
    return x1 == other.x1 && y1 == other.y1 && x2 == other.x2 && y2 == other.y2;
  }
  bool operator!=(const Box& other) const { return !(*this == other); }
};

double intersection_area(const Box& a, const Box& b);
double box_iou(const Box& a, const Box& b);
double crowd_overlap(const Box& detection, const Box& crowd_region);
// The box limited to [0, width] x [0, height].
Box clip_box(const Box& box, double width, double height);
// All four coordinates finite.
bool is_finite(const Box& box);

std::ostream& operator<<(std::ostream& out, const Box& box);

}  // namespace minidet::data
