// Raw loops behind take_rows (take_rows.cpp checks the operands and calls them). out (B, T, C), x (B, K, C)
// and index (B, T) are contiguous and on one device.
#pragma once

#include "core/macros.h"
#include "core/tensor.h"

namespace minidet::ops::detail {

// Throws naming the first index outside [0, K).
void take_rows_cpu(const Tensor& out, const Tensor& x, const Tensor& index);
#if MINIDET_WITH_CUDA
// An index outside [0, K) gives a row of NaN (take_rows.h says why).
void take_rows_cuda(const Tensor& out, const Tensor& x, const Tensor& index);
#endif

}  // namespace minidet::ops::detail
