// sort and argsort along one dim, stable, with the permutation as int64 indices.
//
//   forward   (v, i) = sort(x, dim):  along dim, v[k] = x[i[k]] and v is in ascending order
//                                     (descending = true: descending order)
//   backward  dx[i[k]] = dv[k]        the permutation run backwards: each element of x receives the gradient
//                                     of the place it was moved to (every element exactly once, no atomics)
//   argsort   i only; no gradient.
//
// Order (identical on CPU and CUDA):
// - Stable: equal keys keep their input order, in both directions (descending is not "ascending reversed":
//   the first of two equal values still comes first). `stable` is accepted for PyTorch's signature; minidet
//   always returns the stable order, so stable = false never changes a result.
// - NaN is larger than every number, +inf included; all NaNs are equal to each other (whatever their sign bit
//   or payload), so they keep their input order: ascending puts them last, descending first (PyTorch's rule).
// - -0.0 and +0.0 are equal (IEEE ==), so they too keep their input order. The returned values are the input
//   elements themselves: a -0.0 stays -0.0 and a NaN keeps its bits.
// - Integer dtypes (int64, uint8) sort by value; bool is refused.
//
// Shapes: values and indices have x's shape. A 0-dim x sorts as one element (dim 0 or -1). Empty tensors
// give empty results (and an empty gradient). x may be non-contiguous.
//
// How: the CPU sorts each row with std::stable_sort (rows in parallel with OpenMP); CUDA sorts rows of up to
// 4,096 elements in one thread block each (CUB's block radix sort, in shared memory), longer ones with CUB's
// radix sort (one row) or segmented sort (many rows), all stable, on unsigned integer keys whose plain order
// is the order above (sort_cuda.cu), so that every NaN and signed-zero rule holds on the GPU exactly.
#pragma once

#include "core/tensor.h"
#include "ops/reduction/reduction.h"  // ValuesIndices

namespace minidet {

ValuesIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = true);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = true);

}  // namespace minidet
