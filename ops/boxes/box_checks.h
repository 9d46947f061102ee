// Input checks shared by the box ops: a defined floating tensor whose last dim holds the 4 coordinates.
#pragma once

#include "core/tensor.h"

namespace minidet::ops::detail {

// boxes: defined, float32 or float64, at least 1 dim, last dim 4. `shape` is what the message calls the
// expected shape, e.g. "(..., 4)".
void check_boxes(const char* op, const Tensor& boxes, const char* arg, const char* shape = "(..., 4)");

}  // namespace minidet::ops::detail
