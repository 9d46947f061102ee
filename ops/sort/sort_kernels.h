// Raw kernels behind sort and argsort (not recorded). x, values and indices are contiguous tensors of one
// shape, walked as rows around the sorted dim (ops/reduction/row_layout.h): row r's element k sits at
// layout.base(r) + k * layout.inner in all three. NMS uses sort_rows to order its scores.
#pragma once

#include "core/macros.h"
#include "core/tensor.h"
#include "ops/reduction/row_layout.h"

namespace minidet::ops::detail {

// For each row: values[row, k] = x[row, indices[row, k]], stable, ascending unless `descending`.
void sort_rows(const Tensor& x, const RowLayout& layout, bool descending, const Tensor& values,
               const Tensor& indices);
void sort_rows_cpu(const Tensor& x, const RowLayout& layout, bool descending, const Tensor& values,
                   const Tensor& indices);
#if MINIDET_WITH_CUDA
void sort_rows_cuda(const Tensor& x, const RowLayout& layout, bool descending, const Tensor& values,
                    const Tensor& indices);
#endif

}  // namespace minidet::ops::detail
