// The GEMMs of the im2col lowering (see conv2d_gemm.h), through ops/matmul/gemm.h.
#include "ops/conv2d/conv2d_gemm.h"

#include <algorithm>

#include "ops/matmul/gemm.h"

namespace minidet::ops::detail {

int64_t images_per_chunk(int64_t bytes_per_image, int64_t batch, int64_t max_column_bytes) {
  if (batch <= 1 || bytes_per_image == 0) return std::max<int64_t>(batch, 1);
  return std::clamp<int64_t>(max_column_bytes / bytes_per_image, 1, batch);
}

void columns_to_output(const Tensor& weight, const Tensor& cols, const Tensor& out, int64_t groups, double beta) {
  const int64_t b_count = cols.size(0), rows = cols.size(1), out_hw = cols.size(2);
  const int64_t out_channels = weight.size(0), rows_g = rows / groups, out_g = out_channels / groups;
  if (groups == 1) {
    gemm_batched(weight.view({out_channels, rows}).unsqueeze(0).expand({b_count, out_channels, rows}), cols, out,
                 1.0, beta);
    return;
  }
  const Tensor weight_groups = weight.view({groups, out_g, rows_g});
  for (int64_t b = 0; b < b_count; ++b)
    gemm_batched(weight_groups, cols.select(0, b).view({groups, rows_g, out_hw}),
                 out.select(0, b).view({groups, out_g, out_hw}), 1.0, beta);
}

void output_grad_to_columns(const Tensor& weight, const Tensor& grad_out, const Tensor& grad_cols, int64_t groups) {
  const int64_t b_count = grad_cols.size(0), rows = grad_cols.size(1), out_hw = grad_cols.size(2);
  const int64_t out_channels = weight.size(0), rows_g = rows / groups, out_g = out_channels / groups;
  // The transposes are views: gemm reads them as transposed operands, no copy.
  if (groups == 1) {
    gemm_batched(weight.view({out_channels, rows}).t().unsqueeze(0).expand({b_count, rows, out_channels}), grad_out,
                 grad_cols);
    return;
  }
  const Tensor weight_groups = weight.view({groups, out_g, rows_g});
  for (int64_t b = 0; b < b_count; ++b)
    gemm_batched(weight_groups.transpose(1, 2), grad_out.select(0, b).view({groups, out_g, out_hw}),
                 grad_cols.select(0, b).view({groups, rows_g, out_hw}));
}

void accumulate_weight_grad(const Tensor& grad_out, const Tensor& cols, const Tensor& grad_weight, int64_t groups) {
  const int64_t b_count = cols.size(0), rows = cols.size(1), out_hw = cols.size(2);
  const int64_t out_channels = grad_weight.size(0), rows_g = rows / groups, out_g = out_channels / groups;
  // Image by image, the groups as the GEMM batch; beta = 1 accumulates over images (and chunks).
  const Tensor grad_weight_groups = grad_weight.view({groups, out_g, rows_g});
  for (int64_t b = 0; b < b_count; ++b)
    gemm_batched(grad_out.select(0, b).view({groups, out_g, out_hw}),
                 cols.select(0, b).view({groups, rows_g, out_hw}).transpose(1, 2), grad_weight_groups, 1.0, 1.0);
}

}  // namespace minidet::ops::detail
