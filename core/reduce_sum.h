// Raw (non-recording) summation over dims, and sum_to: the broadcast-gradient reduction.
//
// sum_to(g, shape) undoes broadcasting: if x of `shape` was broadcast to g's shape in the forward pass,
// the gradient w.r.t. x is g summed over the dims that broadcasting created or stretched:
//   g (4, 3, 5) -> shape (3, 1): sum over dim 0 (added in front) and dim 2 (stretched from 1), keep dim 1.
// The autograd engine calls it in one place for every op, so no op's backward has to.
//
// Both kernels are deterministic: each output element is one reduction in a fixed order, never atomics (on
// CUDA a thread, a block or fixed slices per output, chosen from the shape alone: core/reduce_sum_cuda.cu).
#pragma once

#include <vector>

#include "core/broadcast.h"
#include "core/tensor.h"

namespace minidet {

// Sum of `t` over `dims` (an empty list means all dims); the result is contiguous. Floating tensors keep their
// dtype; bool, uint8 and int64 sum in int64 and return int64, as in PyTorch (so uint8 cannot wrap at 256,
// and sum(gt(x, 0)) counts a mask).
Tensor sum_dims_raw(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim);
// Reduces `t` to `shape`, which must be broadcastable to t's shape. Returns t itself when shapes match.
Tensor sum_to(const Tensor& t, const Shape& shape);

namespace detail {
// Sums, for each of `outputs` positions, `reduced` elements of `in`: output o reads in at
// kept_offset(o) + reduced_offset(r) for r in [0, reduced). Offsets come from the two indexers' strides.
struct ReducePlan {
  Shape kept_sizes, kept_strides;        // dims that survive, in order (strides into the input)
  Shape reduced_sizes, reduced_strides;  // dims summed away
  int64_t outputs = 1;
  int64_t reduced = 1;
};
void sum_reduce_cpu(const Tensor& out, const Tensor& in, const ReducePlan& plan);
#if MINIDET_WITH_CUDA
void sum_reduce_cuda(const Tensor& out, const Tensor& in, const ReducePlan& plan);
#endif
}  // namespace detail

}  // namespace minidet
