#include "ops/boxes/box_checks.h"

#include "ops/common/checks.h"

namespace minidet::ops::detail {

void check_boxes(const char* op, const Tensor& boxes, const char* arg, const char* shape) {
  check_defined(op, boxes, arg);
  MINIDET_CHECK(boxes.dim() >= 1 && boxes.size(-1) == 4, op, ": expected ", arg, " of shape ", shape,
                " with 4 coordinates (x1, y1, x2, y2) in the last dim, got shape ", boxes.sizes());
  check_floating(op, boxes, arg);
}

}  // namespace minidet::ops::detail
