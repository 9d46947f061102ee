// index_select: pick whole slices of x along one dim, by a list of indices.
//
//   y = index_select(x, dim, index)      index: 1-D int64 of length n, values in [0, x.size(dim))
//   y has x's shape with size n at dim:  y[..., i, ...] = x[..., index[i], ...]
//   backward:  dx = zeros like x, then dx[..., index[i], ...] += dy[..., i, ...] for every i
//              (an index that repeats collects the sum of its slices' gradients: a scatter-add)
//
// The backward scatter-add is deterministic on the CPU. On CUDA it uses atomicAdd by default, and a
// fixed-order kernel (same bits as the CPU, every run) when DeterministicMode::is_enabled().
// Index values are checked on the host before any kernel runs: for a CUDA index that costs one
// device-to-host copy and a synchronisation, in exchange for an error that names the bad value instead of
// an out-of-bounds read. x: any dtype, any strides; index: int64 on x's device (a 0-dim index counts as 1-D).
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);

}  // namespace minidet
