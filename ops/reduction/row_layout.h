// RowLayout: a contiguous tensor seen as (outer, size, inner) around one dim, so an op "along dim" becomes
// an op on outer*inner independent rows of `size` elements each.
//
//   x of shape (2, 3, 4), dim 1  ->  outer 2, size 3, inner 4: 8 rows of 3 elements.
//   Row r starts at base(r) = (r / inner) * size * inner + r % inner, and its element k lives at
//   base(r) + k * inner (stride `inner`: 1 when dim is the last one, so rows are then contiguous).
//
// Reductions (max, argmax, topk), softmax and cross_entropy all walk rows this way, on the CPU and on CUDA.
// A tensor whose rows have k elements instead of `size` (max's values, topk's outputs) has the same outer and
// inner, so row r of one lines up with row r of the other.
#pragma once

#include <cstdint>

#include "core/macros.h"
#include "core/tensor.h"

namespace minidet::ops {

struct RowLayout {
  int64_t outer = 1;
  int64_t size = 1;
  int64_t inner = 1;

  MINIDET_HOST_DEVICE int64_t rows() const { return outer * inner; }
  MINIDET_HOST_DEVICE int64_t base(int64_t row) const { return (row / inner) * size * inner + row % inner; }
};

// The layout of a contiguous tensor of `sizes` around `dim` (already wrapped). A 0-dim tensor is one row of
// one element.
inline RowLayout row_layout(const Shape& sizes, int64_t dim) {
  RowLayout layout;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
    if (d < dim) layout.outer *= sizes[d];
    if (d == dim) layout.size = sizes[d];
    if (d > dim) layout.inner *= sizes[d];
  }
  return layout;
}

}  // namespace minidet::ops
