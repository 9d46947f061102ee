// nonzero kernels (semantics in nonzero.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace minidet::ops::detail {

// x contiguous: returns the (K,) int64 flat indices of its non-zero elements in increasing order, on x's
// device (CUDA: one device-to-host copy of K).
Tensor flat_nonzero_cpu(const Tensor& x);
// Writes coords (K, ndim) from flat (K,) row-major indices of a tensor of shape `sizes`.
void unravel_indices_cpu(const Tensor& flat, const Shape& sizes, const Tensor& coords);
#if MINIDET_WITH_CUDA
Tensor flat_nonzero_cuda(const Tensor& x);
void unravel_indices_cuda(const Tensor& flat, const Shape& sizes, const Tensor& coords);
#endif

}  // namespace minidet::ops::detail
