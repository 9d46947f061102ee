// softmax and log_softmax along one dim, numerically stable.
//
//   softmax      y_k = exp(x_k - m) / s           with m = max_j x_j, s = sum_j exp(x_j - m)
//   log_softmax  y_k = x_k - m - log s
//
// Subtracting the row max m changes nothing mathematically (it cancels in the ratio) but keeps every
// exponent <= 0, so exp never overflows, and at least one term of s is exactly 1, so log s never sees 0.
//
// Backward, for one row with upstream gradient dy:
//   softmax      dx_k = y_k * (dy_k - sum_j dy_j y_j)      (the Jacobian is diag(y) - y y^T)
//   log_softmax  dx_k = dy_k - exp(y_k) * sum_j dy_j       (the Jacobian is I - 1 softmax^T)
// Both save only the output y. The forward and the backward are each one fused kernel (CPU: a loop per row;
// CUDA: one warp per row). Per row, the forward makes three passes: one for the max m, one for the sum s,
// one to write y; the backward makes two: one for the dot sum, one to write dx.
//
// x: float32 or float64, any shape and strides; dim may be negative. A 0-dim x is a row of one element
// (softmax 1, log_softmax 0). Rows of -inf only give NaN, as in PyTorch.
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace minidet
