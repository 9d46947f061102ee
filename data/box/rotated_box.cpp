#include "data/box/rotated_box.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/factories.h"
#include "ops/box_iou_rotated/rotated_box_math.h"

namespace minidet::data {

std::vector<double> RotatedBox::corners() const {
  const double cos_a = std::cos(angle), sin_a = std::sin(angle);
  const double ux = w / 2 * cos_a, uy = -w / 2 * sin_a;  // half of the box's x axis
  const double vx = h / 2 * sin_a, vy = h / 2 * cos_a;   // half of its y axis
  return {cx - ux - vx, cy - uy - vy, cx + ux - vx, cy + uy - vy,
          cx + ux + vx, cy + uy + vy, cx - ux + vx, cy - uy + vy};
}

RotatedBox RotatedBox::normalized() const { return {cx, cy, w, h, rotated_box_math::normalize_angle(angle)}; }

double rotated_box_iou(const RotatedBox& a, const RotatedBox& b) {
  const double first[5] = {a.cx, a.cy, a.w, a.h, a.angle}, second[5] = {b.cx, b.cy, b.w, b.h, b.angle};
  return rotated_box_math::rotated_box_iou(first, second);
}

namespace {

// The pieces of rotated_box_iou (ops/box_iou_rotated/rotated_box_math.h) that the intersection and the crowd
// overlap need: both boxes' shoelace areas and their clipped intersection, in a's local frame as there. The
// areas come from the same corners as the clip, so a box inside the other gives intersection == its area
// exactly, and a detection inside a crowd region has overlap exactly 1.
struct Clip {
  double intersection = 0, area_a = 0, area_b = 0;
};

Clip clip(const RotatedBox& a, const RotatedBox& b) {
  namespace math = rotated_box_math;
  if (!is_finite(a) || !is_finite(b)) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    return {nan, nan, nan};
  }
  math::Point<double> corners_a[4], corners_b[4], overlap[math::kMaxClipVertices];
  math::box_corners(0.0, 0.0, a.w, a.h, a.angle, corners_a);
  math::box_corners(math::sub_rn(b.cx, a.cx), math::sub_rn(b.cy, a.cy), b.w, b.h, b.angle, corners_b);
  Clip result{0.0, math::polygon_area(corners_a, 4), math::polygon_area(corners_b, 4)};
  if (!(result.area_a > 0) || !(result.area_b > 0) || !math::bounds_meet(corners_a, corners_b)) return result;
  const double inter = math::polygon_area(overlap, math::intersect_quads(corners_a, corners_b, overlap));
  const double noise = math::kEmptyFloor * std::numeric_limits<double>::epsilon() * (result.area_a + result.area_b);
  if (inter > noise) result.intersection = std::min(inter, std::min(result.area_a, result.area_b));
  return result;
}

}  // namespace

double rotated_intersection_area(const RotatedBox& a, const RotatedBox& b) { return clip(a, b).intersection; }

double rotated_crowd_overlap(const RotatedBox& detection, const RotatedBox& crowd_region) {
  const Clip parts = clip(detection, crowd_region);
  if (std::isnan(parts.area_a)) return parts.area_a;  // a non-finite box: NaN, as rotated_box_iou
  return parts.area_a > 0 ? parts.intersection / parts.area_a : 0.0;
}

Box bounding_box(const RotatedBox& box) {
  const std::vector<double> c = box.corners();
  Box hull{c[0], c[1], c[0], c[1]};
  for (size_t k = 2; k < c.size(); k += 2) {
    hull.x1 = std::min(hull.x1, c[k]);
    hull.x2 = std::max(hull.x2, c[k]);
    hull.y1 = std::min(hull.y1, c[k + 1]);
    hull.y2 = std::max(hull.y2, c[k + 1]);
  }
  return hull;
}

RotatedBox from_axis_aligned(const Box& box) {
  return {(box.x1 + box.x2) / 2, (box.y1 + box.y2) / 2, box.width(), box.height(), 0.0};
}

bool is_finite(const RotatedBox& box) {
  return std::isfinite(box.cx) && std::isfinite(box.cy) && std::isfinite(box.w) && std::isfinite(box.h) &&
         std::isfinite(box.angle);
}

Tensor rotated_boxes_tensor(const std::vector<RotatedBox>& boxes, const TensorOptions& options) {
  std::vector<double> rows;
  rows.reserve(boxes.size() * 5);
  for (const RotatedBox& box : boxes)
    for (double v : {box.cx, box.cy, box.w, box.h, box.angle}) rows.push_back(v);
  return from_vector<double>(rows, {static_cast<int64_t>(boxes.size()), 5}).to(options);
}

std::ostream& operator<<(std::ostream& out, const RotatedBox& box) {
  return out << "(" << box.cx << ", " << box.cy << ", " << box.w << ", " << box.h << ", " << box.angle << ")";
}

}  // namespace minidet::data
