#include "data/box/box.h"

#include <algorithm>
#include <cmath>

#include "ops/boxes/box_math.h"

namespace minidet::data {

namespace {
// The same arithmetic as the box ops and nms (ops/boxes/box_math.h): one definition of area and IoU.
struct Coords {
  double values[4];
  explicit Coords(const Box& box) : values{box.x1, box.y1, box.x2, box.y2} {}
};
}  // namespace

double Box::area() const { return box_math::box_area(Coords(*this).values); }

double intersection_area(const Box& a, const Box& b) {
  return box_math::intersection_area(Coords(a).values, Coords(b).values);
}

double box_iou(const Box& a, const Box& b) { return box_math::box_iou(Coords(a).values, Coords(b).values); }

double crowd_overlap(const Box& detection, const Box& crowd_region) {
  const double detection_area = detection.area();
  return detection_area > 0 ? intersection_area(detection, crowd_region) / detection_area : 0.0;
}

Box clip_box(const Box& box, double width, double height) {
  return {std::clamp(box.x1, 0.0, width), std::clamp(box.y1, 0.0, height),
          std::clamp(box.x2, 0.0, width), std::clamp(box.y2, 0.0, height)};
}

bool is_finite(const Box& box) {
  return std::isfinite(box.x1) && std::isfinite(box.y1) && std::isfinite(box.x2) && std::isfinite(box.y2);
}

std::ostream& operator<<(std::ostream& out, const Box& box) {
  return out << '(' << box.x1 << ", " << box.y1 << ", " << box.x2 << ", " << box.y2 << ')';
}

}  // namespace minidet::data
