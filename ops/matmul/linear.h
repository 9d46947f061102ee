// The fully connected layer's op.
//
//   y = x W^T + b      x (..., in), W (out, in), b (out) or none  ->  y (..., out)
//   y_{r,o} = sum_i x_{r,i} W_{o,i} + b_o       (r runs over all leading positions of x, flattened)
//   backward, with G = dL/dy as a (rows, out) matrix and X = x as a (rows, in) matrix:
//     dx = G W        (rows, out)(out, in), reshaped to x's shape
//     dW = G^T X      (out, rows)(rows, in): summed over every row, as parameter gradients are
//     db = sum of G over its rows
// W is stored (out, in) like PyTorch, so W^T is a transposed view that gemm reads in place. The bias is
// written into y first and gemm accumulates on top of it (beta = 1), so there is no separate add pass.
// Saved: W when x needs a gradient, x when W does; the bias is never saved.
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace minidet
