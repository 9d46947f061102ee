// Raw kernels behind max/min/argmax/topk (sum and mean use core's sum_dims_raw). Every tensor here is
// contiguous and walked as rows (ops/reduction/row_layout.h). The `*_kernel` functions pick CPU or CUDA by
// device (in reduction.cpp); the CPU versions are the reference the CUDA ones are tested against.
#pragma once

#include <type_traits>

#include "core/macros.h"
#include "core/tensor.h"
#include "ops/reduction/row_layout.h"

namespace minidet::ops::detail {

enum class Extremum { Max, Min };

template <typename T>
MINIDET_HOST_DEVICE inline bool is_nan_value(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  return false;
}

// Whether a should replace b as the running max (or min). NaN beats every number and nothing beats NaN,
// so NaN propagates; a tie is not a win, so the first occurrence stays.
template <typename T>
MINIDET_HOST_DEVICE inline bool beats(Extremum kind, T a, T b) {
  if (is_nan_value(b)) return false;
  if (is_nan_value(a)) return true;
  return kind == Extremum::Max ? a > b : a < b;
}

// For each row of x: values[row] = the max (or min) and indices[row] = its first position in the row.
// values has x's dtype, indices int64; both hold layout.rows() elements. layout.size must be > 0.
void extremum_rows_kernel(Extremum kind, const Tensor& x, const RowLayout& layout, const Tensor& values,
                          const Tensor& indices);
void extremum_rows_cpu(Extremum kind, const Tensor& x, const RowLayout& layout, const Tensor& values,
                       const Tensor& indices);

// The backward of "pick k elements per row": grad_x (zero-filled, layout) receives
//     grad_x[row, indices[row, j]] = grad[row, j]      for j < k,
// where grad and indices have the same outer/inner as layout and k elements per row. Indices within a row
// must be distinct (they are: they come from max or topk), so each element is written at most once.
void scatter_rows_kernel(const Tensor& grad_x, const RowLayout& layout, const Tensor& grad, const Tensor& indices,
                         int64_t k);
void scatter_rows_cpu(const Tensor& grad_x, const RowLayout& layout, const Tensor& grad, const Tensor& indices,
                      int64_t k);

// topk along the last dim of a contiguous (rows, n) tensor into values and indices of shape (rows, k):
// sorted, ties in input order, NaN largest.
void topk_last_dim_kernel(const Tensor& x, int64_t k, bool largest, const Tensor& values, const Tensor& indices);
void topk_last_dim_cpu(const Tensor& x, int64_t k, bool largest, const Tensor& values, const Tensor& indices);

#if MINIDET_WITH_CUDA
void extremum_rows_cuda(Extremum kind, const Tensor& x, const RowLayout& layout, const Tensor& values,
                        const Tensor& indices);
void scatter_rows_cuda(const Tensor& grad_x, const RowLayout& layout, const Tensor& grad, const Tensor& indices,
                       int64_t k);
void topk_last_dim_cuda(const Tensor& x, int64_t k, bool largest, const Tensor& values, const Tensor& indices);
#endif

}  // namespace minidet::ops::detail
