// StridedIndexer: maps the linear index of an output element to the storage offsets of N operands.
//
// Every elementwise kernel (copy, fill, and later add, mul, relu, ...) walks the output in row-major order,
// element i at a time, and needs to know where element i of each operand lives. With sizes (s0..sn) and an
// operand's strides (t0..tn), element i has coordinates c_d = (i / (s_{d+1}*...*s_n)) % s_d and lives at
// sum_d c_d * t_d. Broadcast operands simply have stride 0 in the broadcast dims.
//
// Before use, adjacent dims that are contiguous for *every* operand are merged (coalesce), so a plain
// contiguous tensor becomes one dim and the divisions vanish. The struct is trivially copyable and is
// passed to CUDA kernels by value.
#pragma once

#include <cstdint>

#include "core/macros.h"
#include "core/tensor.h"

namespace minidet {

constexpr int kMaxIndexerDims = 12;

template <int N>
struct StridedIndexer {
  int ndim = 0;
  int64_t sizes[kMaxIndexerDims];
  int64_t strides[N][kMaxIndexerDims];  // in elements

  // In the index type I: int64_t, or a 32-bit type where the caller has checked that every offset fits
  // (32-bit divisions take a fraction of the instructions of 64-bit ones on a GPU).
  template <typename I>
  MINIDET_HOST_DEVICE void offsets(I linear, I (&out)[N]) const {
    for (int a = 0; a < N; ++a) out[a] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const I coord = linear % I(sizes[d]);
      linear /= I(sizes[d]);
      for (int a = 0; a < N; ++a) out[a] += coord * I(strides[a][d]);
    }
  }
  // The largest offset operand a reaches, for choosing I.
  MINIDET_HOST_DEVICE int64_t largest_offset(int a) const {
    int64_t most = 0;
    for (int d = 0; d < ndim; ++d) most += (sizes[d] - 1) * (strides[a][d] < 0 ? -strides[a][d] : strides[a][d]);
    return most;
  }
};

// Builds the indexer for `shape`, with one stride list per operand (each the same length as shape).
// Operands are expected to be already broadcast (expanded) to `shape`.
template <int N>
StridedIndexer<N> make_indexer(const Shape& shape, const Shape* const (&operand_strides)[N]) {
  StridedIndexer<N> ix;
  MINIDET_CHECK(shape.size() <= static_cast<size_t>(kMaxIndexerDims), "elementwise kernels support at most ",
                kMaxIndexerDims, " dims, got ", shape.size());
  // Drop size-1 dims (their stride never matters), then merge dim d into d+1 when, for every operand,
  // stride[d] == stride[d+1] * size[d+1].
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (ix.ndim > 0) {
      bool mergeable = true;
      for (int a = 0; a < N; ++a)
        mergeable = mergeable && (*operand_strides[a])[d] * shape[d] == ix.strides[a][ix.ndim - 1];
      // Merge the new inner dim into the previous one: (prev, cur) -> prev*cur with cur's strides.
      if (mergeable) {
        ix.sizes[ix.ndim - 1] *= shape[d];
        for (int a = 0; a < N; ++a) ix.strides[a][ix.ndim - 1] = (*operand_strides[a])[d];
        continue;
      }
    }
    ix.sizes[ix.ndim] = shape[d];
    for (int a = 0; a < N; ++a) ix.strides[a][ix.ndim] = (*operand_strides[a])[d];
    ++ix.ndim;
  }
  return ix;
}

}  // namespace minidet
