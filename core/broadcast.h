// NumPy broadcasting rules: shapes align from the right; a dim of size 1 stretches to match the other.
//   (4, 1, 5) and (3, 1) -> (4, 3, 5)
#pragma once

#include "core/tensor.h"

namespace minidet {

// True if `from` broadcasts to `to`.
bool broadcastable_to(const Shape& from, const Shape& to);
// The common shape of a and b; `op` names the caller in the error when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace minidet
