// box_area, clip_boxes_to_image, remove_small_boxes: compositions of differentiable ops (see box_geometry.h).
#include "ops/boxes/box_geometry.h"

#include <cmath>

#include "ops/boxes/box_checks.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/compare.h"
#include "ops/elementwise/unary.h"
#include "ops/indexing/nonzero.h"
#include "ops/shape/shape.h"

namespace minidet {

Tensor box_area(const Tensor& boxes) {
  ops::detail::check_boxes("box_area", boxes, "boxes");
  // (x2, y2) - (x1, y1) as one (..., 2) op, clamped at 0, then width * height.
  const Tensor extent = relu(sub(narrow(boxes, -1, 2, 2), narrow(boxes, -1, 0, 2)));
  return mul(select(extent, -1, 0), select(extent, -1, 1));
}

Tensor clip_boxes_to_image(const Tensor& boxes, double height, double width) {
  const char* op = "clip_boxes_to_image";
  ops::detail::check_boxes(op, boxes, "boxes");
  MINIDET_CHECK(std::isfinite(height) && std::isfinite(width) && height >= 0 && width >= 0, op,
                ": expected a finite image size >= 0, got height ", height, " and width ", width);
  // Columns 0, 2 are x and 1, 3 are y. Stacking the clamped (x1, x2) and (y1, y2) pairs on a new last dim
  // gives (..., 2, 2) = ((x1, y1), (x2, y2)), which is (x1, y1, x2, y2) once the last two dims are merged.
  const Tensor xs = clamp(slice(boxes, -1, 0, 4, 2), 0.0, width);
  const Tensor ys = clamp(slice(boxes, -1, 1, 4, 2), 0.0, height);
  return flatten(stack({xs, ys}, -1), -2, -1);
}

Tensor remove_small_boxes(const Tensor& boxes, double min_size) {
  const char* op = "remove_small_boxes";
  ops::detail::check_boxes(op, boxes, "boxes", "(N, 4)");
  MINIDET_CHECK(boxes.dim() == 2, op, ": expected boxes of shape (N, 4), got shape ", boxes.sizes());
  MINIDET_CHECK(!std::isnan(min_size), op, ": min_size is NaN");
  NoGradGuard raw;  // indices only: nothing to differentiate
  const Tensor extent = sub(narrow(boxes, -1, 2, 2), narrow(boxes, -1, 0, 2));  // (N, 2): widths, heights
  // Both sides large enough <=> the smaller one is; ge is false on NaN, so NaN boxes are removed.
  const Tensor keep = ge(minimum(select(extent, -1, 0), select(extent, -1, 1)), min_size);
  return flat_nonzero(keep);
}

}  // namespace minidet
