#include "data/shapes/rasterize.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace minidet::data {

const char* shape_kind_name(ShapeKind kind) {
  switch (kind) {
    case ShapeKind::kSquare: return "square";
    case ShapeKind::kCircle: return "circle";
    case ShapeKind::kTriangle: return "triangle";
    case ShapeKind::kCross: return "cross";
    case ShapeKind::kRing: return "ring";
  }
  return "unknown";
}

namespace {

constexpr double kCrossHalfThickness = 1.0 / 3.0;
constexpr double kRingInnerRadius = 0.55;

bool inside_shape(ShapeKind kind, int orientation, double u, double v) {
  switch (kind) {
    case ShapeKind::kSquare: return std::abs(u) <= 1 && std::abs(v) <= 1;
    case ShapeKind::kCircle: return u * u + v * v <= 1;
    case ShapeKind::kTriangle: {
      // Turn the point back by the shape's orientation, then test the upward triangle.
      for (int turn = 0; turn < (orientation & 3); ++turn) {
        const double turned_u = v, turned_v = -u;
        u = turned_u;
        v = turned_v;
      }
      return v <= 1 && std::abs(u) <= (1 + v) / 2;
    }
    case ShapeKind::kCross:
      return (std::abs(u) <= kCrossHalfThickness && std::abs(v) <= 1) ||
             (std::abs(v) <= kCrossHalfThickness && std::abs(u) <= 1);
    case ShapeKind::kRing: {
      const double radius_squared = u * u + v * v;
      return radius_squared <= 1 && radius_squared >= kRingInnerRadius * kRingInnerRadius;
    }
  }
  return false;
}

}  // namespace

int64_t Mask::count() const { return std::count(inside.begin(), inside.end(), uint8_t{1}); }

Mask rasterize_shape(const ShapeGeometry& shape, int64_t image_width, int64_t image_height) {
  const double half = shape.size / 2;
  Mask mask;
  if (!(half > 0)) return mask;
  mask.x0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(shape.center_x - half)));
  mask.y0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(shape.center_y - half)));
  const int64_t x_end = std::min(image_width, static_cast<int64_t>(std::ceil(shape.center_x + half)) + 1);
  const int64_t y_end = std::min(image_height, static_cast<int64_t>(std::ceil(shape.center_y + half)) + 1);
  mask.width = std::max<int64_t>(0, x_end - mask.x0);
  mask.height = std::max<int64_t>(0, y_end - mask.y0);
  mask.inside.assign(static_cast<size_t>(mask.width * mask.height), 0);
  for (int64_t row = 0; row < mask.height; ++row) {
    const double v = (static_cast<double>(mask.y0 + row) + 0.5 - shape.center_y) / half;
    for (int64_t column = 0; column < mask.width; ++column) {
      const double u = (static_cast<double>(mask.x0 + column) + 0.5 - shape.center_x) / half;
      mask.inside[row * mask.width + column] = inside_shape(shape.kind, shape.orientation, u, v) ? 1 : 0;
    }
  }
  return mask;
}

Box tight_box(const Mask& mask) {
  int64_t min_x = INT64_MAX, min_y = INT64_MAX, max_x = -1, max_y = -1;
  for (int64_t row = 0; row < mask.height; ++row)
    for (int64_t column = 0; column < mask.width; ++column)
      if (mask.inside[row * mask.width + column]) {
        min_x = std::min(min_x, mask.x0 + column);
        max_x = std::max(max_x, mask.x0 + column);
        min_y = std::min(min_y, mask.y0 + row);
        max_y = std::max(max_y, mask.y0 + row);
      }
  if (max_x < 0) return {};
  return {static_cast<double>(min_x), static_cast<double>(min_y), static_cast<double>(max_x + 1),
          static_cast<double>(max_y + 1)};
}

namespace {

enum class RotatedFill { kRectangle, kEllipse };

Mask rasterize_rotated(RotatedFill fill, double cx, double cy, double w, double h, double angle,
                       int64_t image_width, int64_t image_height) {
  Mask mask;
  if (!(w > 0 && h > 0) || !std::isfinite(cx) || !std::isfinite(cy) || !std::isfinite(angle)) return mask;
  const double cos_a = std::cos(angle), sin_a = std::sin(angle);
  // The axis-aligned half-extents of the rotated box bound both shapes; one pixel more on each side.
  const double extent_x = std::abs(w / 2 * cos_a) + std::abs(h / 2 * sin_a);
  const double extent_y = std::abs(w / 2 * sin_a) + std::abs(h / 2 * cos_a);
  mask.x0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(cx - extent_x)) - 1);
  mask.y0 = std::max<int64_t>(0, static_cast<int64_t>(std::floor(cy - extent_y)) - 1);
  const int64_t x_end = std::min(image_width, static_cast<int64_t>(std::ceil(cx + extent_x)) + 1);
  const int64_t y_end = std::min(image_height, static_cast<int64_t>(std::ceil(cy + extent_y)) + 1);
  mask.width = std::max<int64_t>(0, x_end - mask.x0);
  mask.height = std::max<int64_t>(0, y_end - mask.y0);
  mask.inside.assign(static_cast<size_t>(mask.width * mask.height), 0);
  const double half_w = w / 2, half_h = h / 2;
  for (int64_t row = 0; row < mask.height; ++row) {
    const double dy = static_cast<double>(mask.y0 + row) + 0.5 - cy;
    for (int64_t column = 0; column < mask.width; ++column) {
      const double dx = static_cast<double>(mask.x0 + column) + 0.5 - cx;
      // Projections on the box's axes (cos a, -sin a) and (sin a, cos a).
      const double u = dx * cos_a - dy * sin_a, v = dx * sin_a + dy * cos_a;
      bool inside;
      if (fill == RotatedFill::kRectangle) {
        inside = std::abs(u) <= half_w && std::abs(v) <= half_h;
      } else {
        const double su = u / half_w, sv = v / half_h;
        inside = su * su + sv * sv <= 1;
      }
      mask.inside[row * mask.width + column] = inside ? 1 : 0;
    }
  }
  return mask;
}

}  // namespace

Mask rasterize_rotated_rectangle(double center_x, double center_y, double width, double height, double angle,
                                 int64_t image_width, int64_t image_height) {
  return rasterize_rotated(RotatedFill::kRectangle, center_x, center_y, width, height, angle, image_width,
                           image_height);
}

Mask rasterize_rotated_ellipse(double center_x, double center_y, double width, double height, double angle,
                               int64_t image_width, int64_t image_height) {
  return rasterize_rotated(RotatedFill::kEllipse, center_x, center_y, width, height, angle, image_width,
                           image_height);
}

}  // namespace minidet::data
