// gather: pick one element of x along dim for every element of index.
//
//   y = gather(x, dim, index)     index: int64 with x's number of dims, index.size(d) <= x.size(d) for
//                                 d != dim, values in [0, x.size(dim)); y has index's shape.
//   for dim = 1 of a 3-D x:       y[a][i][c] = x[a][ index[a][i][c] ][c]
//   backward:                     dx = zeros like x, then dx[a][ index[a][i][c] ][c] += dy[a][i][c]
//                                 (a scatter-add: repeated indices sum their gradients)
//
// Determinism and index checking are as for index_select (index_select.h): CPU always deterministic; CUDA
// atomicAdd by default and a fixed-order kernel under DeterministicMode; values checked on the host.
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);

}  // namespace minidet
