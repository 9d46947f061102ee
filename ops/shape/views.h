// Differentiable views: the recording counterparts of Tensor's raw view methods (core/tensor.h).
//
// A view y of x shares x's storage; only sizes, strides and offset change. So y = V(x) is a linear map that
// picks (and maybe repeats) elements of x, and its backward is the adjoint of that map:
//
//   view / reshape / flatten / squeeze / unsqueeze   dx = reshape(dy, shape of x)
//   permute(dims)                                    dx = permute(dy, inverse of dims)
//   transpose(d0, d1)                                dx = transpose(dy, d0, d1)
//   slice / narrow / select                          dx = zeros(shape of x), with dy copied into the same
//                                                         slice of it (the elements not picked get 0)
//   expand(shape)                                    dx = sum of dy over the broadcast dims: returned as dy,
//                                                         the engine's sum_to does the sum (see engine.h)
//
// Each output is a fresh tensor over the same storage (writing through x is visible in y and vice versa),
// so a view of a parameter carries its own grad_fn while the parameter stays a leaf. reshape and flatten
// copy when the strides cannot express the new shape, exactly like Tensor::reshape.
// Dims may be negative (counted from the end). Every dtype works; only floating tensors carry gradients.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace minidet {

Tensor view(const Tensor& x, const Shape& shape);  // one size may be -1; fails when not expressible
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
// Python-style x[start:end:step] along dim (start/end clamped, negatives count from the end).
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);  // strict bounds
Tensor select(const Tensor& x, int64_t dim, int64_t index);                   // removes dim
Tensor expand(const Tensor& x, const Shape& shape);                           // -1 keeps a size
Tensor squeeze(const Tensor& x);               // drops every size-1 dim
Tensor squeeze(const Tensor& x, int64_t dim);  // drops dim if its size is 1
Tensor unsqueeze(const Tensor& x, int64_t dim);

}  // namespace minidet
