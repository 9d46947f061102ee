// Reductions: sum, mean, max/min (with indices), argmax/argmin and topk.
//
//   sum   y = sum_{k in dims} x_k               dx = dy broadcast back over the summed dims
//   mean  y = sum_{k in dims} x_k / n           dx = dy / n broadcast back     (n = elements per output)
//   max   (v, i) = (max_k x_k, first k where x_k = v), along one dim
//                                               dx_k = dy if k == i, else 0    (min: the same with min)
//   max   v = max over all elements             dx_k = dy / m where x_k == v (m = how many tie), else 0;
//                                               when v is NaN, where x_k is NaN (m = how many NaNs)
//   topk  the k largest (or smallest) x along dim, with their indices
//                                               dx = dy scattered to those indices, 0 elsewhere
//   argmax / argmin                             indices only; no gradient
//
// Conventions:
// - dims may be negative; an empty dims list means every dim. keepdim keeps each reduced dim with size 1.
// - Ties: max/min along a dim return the first occurrence (PyTorch's CPU rule), so the whole gradient goes
//   to one element. The full max(x)/min(x) instead splits the gradient evenly among tied elements, as
//   PyTorch does: (max over all) has no single "selected" index to prefer.
// - NaN propagates: max and min both return NaN (and its first index) when a row contains one. topk treats
//   every NaN (either sign bit) as larger than every number, on both devices (CUDA returns it as +NaN).
// - topk returns its values sorted (largest first when largest, else smallest first) whether or not
//   `sorted` is set, and equal values keep their input order (-0.0 and +0.0 are equal too, on both devices:
//   CUDA topk is sort's stable sort, ops/sort/sort.h, cut to k).
// - sum takes any dtype: float32/float64 sum in their own dtype; bool, uint8 and int64 sum in int64 and return
//   int64, like PyTorch (so sum(gt(x, 0)) counts). mean takes floating only; max/min/argmax/topk any numeric
//   dtype. Indices are int64.
// - Empty inputs: sum of nothing is 0 and mean of nothing is NaN (like PyTorch). max/min/argmax over an
//   empty dim is an error (no element to pick); over a non-empty dim of a tensor with other empty dims,
//   the result is empty.
//
// All kernels are deterministic: each output is one fixed-order reduction (on CUDA: one block per output
// row with a fixed tree), and every backward writes each input element at most once, without atomics.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace minidet {

// The result of max/min along a dim and of topk: values, and int64 indices along that dim.
struct ValuesIndices {
  Tensor values;
  Tensor indices;
};

Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);  // 0-dim
Tensor min(const Tensor& x);

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);

}  // namespace minidet
