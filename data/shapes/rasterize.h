// Rasterizing one synthetic shape into a mask, and the tight box around a mask.
//
// A shape is given by its kind, the centre of its extent and the side of that extent (a square of side
// `size` that the shape touches on all four sides, up to pixel sampling). A pixel belongs to the shape when
// its centre (x + 0.5, y + 0.5) does. Only +, -, *, / and comparisons are used (no sin, cos or sqrt), so
// the masks are bit-identical on every IEEE-754 machine.
//
// In the shape's own coordinates u = (x + 0.5 - cx) / half, v = (y + 0.5 - cy) / half, with half = size / 2:
//   square    |u| <= 1 and |v| <= 1
//   circle    u² + v² <= 1
//   triangle  pointing up: v <= 1 and |u| <= (1 + v) / 2; orientation k rotates it by k quarter turns
//   cross     a plus sign: one bar |u| <= 1/3, |v| <= 1 and the other with u and v swapped
//   ring      (0.55)² <= u² + v² <= 1
#pragma once

#include <cstdint>
#include <vector>

#include "data/box/box.h"

namespace minidet::data {

enum class ShapeKind { kSquare = 1, kCircle = 2, kTriangle = 3, kCross = 4, kRing = 5 };
constexpr int kNumShapeKinds = 5;
const char* shape_kind_name(ShapeKind kind);

struct ShapeGeometry {
  ShapeKind kind = ShapeKind::kSquare;
  double center_x = 0, center_y = 0;
  double size = 0;       // side of the square extent, in pixels
  int orientation = 0;   // quarter turns, used by the triangle
};

// The shape's pixels inside the rectangle [x0, x0 + width) x [y0, y0 + height) of the image.
struct Mask {
  int64_t x0 = 0, y0 = 0, width = 0, height = 0;
  std::vector<uint8_t> inside;  // row-major, 1 where the pixel belongs to the shape

  bool contains(int64_t x, int64_t y) const {  // image coordinates; false outside the rectangle
    return x >= x0 && y >= y0 && x < x0 + width && y < y0 + height && inside[(y - y0) * width + (x - x0)];
  }
  int64_t count() const;
};

// Pixels outside [0, image_width) x [0, image_height) are left out.
Mask rasterize_shape(const ShapeGeometry& shape, int64_t image_width, int64_t image_height);
// [min_x, min_y, max_x + 1, max_y + 1] over the mask's pixels; an all-zero box for an empty mask.
Box tight_box(const Mask& mask);

// Filled rotated shapes, for the rotated shapes dataset (data/shapes/rotated_shapes_dataset.h). The shape is
// given by a rotated box (cx, cy, w, h, a) in the convention of ops/box_iou_rotated/box_iou_rotated.h: a in
// radians, counter-clockwise on screen, the box's x axis along (cos a, -sin a) and its y axis along
// (sin a, cos a). A pixel belongs when its centre p = (x + 0.5, y + 0.5) does; in the box's own coordinates
//   u = (p - c) . (cos a, -sin a),   v = (p - c) . (sin a, cos a)
//   rectangle  |u| <= w/2 and |v| <= h/2           (the box itself)
//   ellipse    (2u / w)^2 + (2v / h)^2 <= 1        (the ellipse inscribed in the box, axes w and h)
// Unlike rasterize_shape these need cos a and sin a, computed once per shape with std::cos and std::sin: a
// pixel depends on their last bit only when its centre lies within about 1e-13 pixel of the outline, so
// the masks agree across machines in practice, not by construction. Pixels outside the image are left out.
Mask rasterize_rotated_rectangle(double center_x, double center_y, double width, double height, double angle,
                                 int64_t image_width, int64_t image_height);
Mask rasterize_rotated_ellipse(double center_x, double center_y, double width, double height, double angle,
                               int64_t image_width, int64_t image_height);

}  // namespace minidet::data
