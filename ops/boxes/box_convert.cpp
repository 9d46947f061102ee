// Box format conversions: linear maps written with differentiable narrow / elementwise / cat (box_convert.h).
#include "ops/boxes/box_convert.h"

#include "ops/boxes/box_checks.h"
#include "ops/elementwise/binary.h"
#include "ops/shape/shape.h"

namespace minidet {

Tensor box_xyxy_to_cxcywh(const Tensor& boxes) {
  ops::detail::check_boxes("box_xyxy_to_cxcywh", boxes, "boxes");
  const Tensor low = narrow(boxes, -1, 0, 2), high = narrow(boxes, -1, 2, 2);  // (x1, y1), (x2, y2)
  return cat({mul(add(low, high), 0.5), sub(high, low)}, -1);
}

Tensor box_cxcywh_to_xyxy(const Tensor& boxes) {
  ops::detail::check_boxes("box_cxcywh_to_xyxy", boxes, "boxes");
  const Tensor center = narrow(boxes, -1, 0, 2), half_size = mul(narrow(boxes, -1, 2, 2), 0.5);
  return cat({sub(center, half_size), add(center, half_size)}, -1);
}

}  // namespace minidet
