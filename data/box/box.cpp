#include "data/box/box.h"

#include <algorithm>
#include <cmath>

namespace minidet::data {

double Box::area() const { return std::max(0.0, width()) * std::max(0.0, height()); }

double intersection_area(const Box& a, const Box& b) {
  const double overlap_width = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  const double overlap_height = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  if (overlap_width <= 0 || overlap_height <= 0) return 0.0;
  return overlap_width * overlap_height;
}

double box_iou(const Box& a, const Box& b) {
  const double intersection = intersection_area(a, b);
  const double union_area = a.area() + b.area() - intersection;
  return union_area > 0 ? intersection / union_area : 0.0;
}

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
