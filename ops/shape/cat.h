// Joining tensors along a dim.
//
//   y = cat({x_0, ..., x_{n-1}}, dim)    x_i are laid one after the other along dim; every other size must
//                                       match. dx_i = the slice of dy that x_i filled: a view of dy along
//                                       dim at offset (size of x_0 + ... + size of x_{i-1}).
//   y = stack({x_0, ..., x_{n-1}}, dim)  = cat({unsqueeze(x_i, dim)}, dim): a new dim of size n (dim may be
//                                       0..ndim, or negative); all shapes must be equal.
//
// Inputs must share dtype and device. Pieces of size 0 along dim are allowed. The output is a new buffer.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace minidet {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

}  // namespace minidet
