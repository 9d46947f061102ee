// The shared parts of the im2col lowering (see conv2d_lowering.h); the GEMMs go through ops/matmul/gemm.h.
#include "ops/conv2d/conv2d_lowering.h"

#include <algorithm>

#include "core/accumulate.h"
#include "core/factories.h"
#include "core/reduce_sum.h"
#include "ops/matmul/gemm.h"

namespace minidet::ops::detail {

void check_window(const char* op, const ConvWindow& o) {
  MINIDET_CHECK(o.stride_h >= 1 && o.stride_w >= 1, op, ": stride must be >= 1, got (", o.stride_h, ", ", o.stride_w,
                ")");
  MINIDET_CHECK(o.dilation_h >= 1 && o.dilation_w >= 1, op, ": dilation must be >= 1, got (", o.dilation_h, ", ",
                o.dilation_w, ")");
  MINIDET_CHECK(o.pad_h >= 0 && o.pad_w >= 0, op, ": padding must be >= 0, got (", o.pad_h, ", ", o.pad_w, ")");
  MINIDET_CHECK(o.max_column_bytes >= 0, op, ": max_column_bytes must be >= 0 (0: the device's default), got ",
                o.max_column_bytes);
}

ConvGeometry conv_geometry(const char* op, const Tensor& input, int64_t kernel_h, int64_t kernel_w,
                           const ConvWindow& o) {
  const int64_t padded_h = input.size(2) + 2 * o.pad_h, padded_w = input.size(3) + 2 * o.pad_w;
  const int64_t extent_h = o.dilation_h * (kernel_h - 1) + 1, extent_w = o.dilation_w * (kernel_w - 1) + 1;
  MINIDET_CHECK(extent_h <= padded_h && extent_w <= padded_w, op, ": kernel (", extent_h, " x ", extent_w,
                " with dilation) is larger than the padded input (", padded_h, " x ", padded_w,
                "): the output size would be below 1");
  ConvGeometry g;
  g.channels = input.size(1);
  g.height = input.size(2);
  g.width = input.size(3);
  g.kernel_h = kernel_h;
  g.kernel_w = kernel_w;
  g.stride_h = o.stride_h;
  g.stride_w = o.stride_w;
  g.pad_h = o.pad_h;
  g.pad_w = o.pad_w;
  g.dilation_h = o.dilation_h;
  g.dilation_w = o.dilation_w;
  g.out_h = (padded_h - extent_h) / o.stride_h + 1;
  g.out_w = (padded_w - extent_w) / o.stride_w + 1;
  return g;
}

int64_t images_per_chunk(int64_t bytes_per_image, int64_t batch, const ConvWindow& window, const Device& device) {
  if (batch <= 1 || bytes_per_image == 0) return std::max<int64_t>(batch, 1);
  const int64_t bound =
      window.max_column_bytes > 0 ? window.max_column_bytes : device.is_cuda() ? kCudaColumnBytes : kCpuColumnBytes;
  return std::clamp<int64_t>(bound / bytes_per_image, 1, batch);
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

int64_t weight_grad_slices(const Tensor& like, int64_t m, int64_t n, int64_t k) {
  if (!like.is_cuda()) return 1;  // the CPU's GEMM already uses every core; slices would only add a sum
  constexpr int64_t kTargetBlocks = 264, kMaxSlices = 128, kMinSpan = 256, kTile = 64;
  const int64_t tiles = ((m + kTile - 1) / kTile) * ((n + kTile - 1) / kTile);
  int64_t slices = 1;
  while (2 * slices * tiles <= kTargetBlocks && 2 * slices <= kMaxSlices && k % (2 * slices) == 0 &&
         k / (2 * slices) >= kMinSpan)
    slices *= 2;
  return slices;
}

Tensor chunk_weight_grad(const Tensor& grad_by_channel, const Tensor& cols, int64_t groups) {
  const int64_t out_channels = grad_by_channel.size(0), k = grad_by_channel.size(1), rows = cols.size(0);
  const int64_t out_g = out_channels / groups, rows_g = rows / groups;
  const int64_t slices = groups == 1 ? weight_grad_slices(cols, out_channels, rows, k) : 1;
  if (slices > 1) {
    // Slice s of K is the columns [s*span, (s+1)*span) of both operands: a batch with stride span.
    const int64_t span = k / slices;
    const Tensor per_slice = empty({slices, out_channels, rows}, cols.options());
    gemm_batched(grad_by_channel.view({out_channels, slices, span}).transpose(0, 1),
                 cols.view({rows, slices, span}).permute({1, 2, 0}), per_slice);
    return sum_dims_raw(per_slice, {0}, false);
  }
  const Tensor grad_weight = empty({groups, out_g, rows_g}, cols.options());
  gemm_batched(grad_by_channel.view({groups, out_g, k}), cols.view({groups, rows_g, k}).transpose(1, 2),
               grad_weight);
  return grad_weight.view({out_channels, rows_g});
}

void columns_to_output(const Tensor& weight, const RowSource& cols, const Tensor& out, int64_t groups, double beta) {
  const int64_t b_count = out.size(0), out_hw = out.size(2), out_channels = weight.size(0);
  const int64_t out_g = out_channels / groups, rows_g = weight.numel() / out_channels;
  const Tensor weight_groups = weight.view({groups, out_g, rows_g});
  SourceOperand columns{&cols};
  if (groups == 1) {  // one batched GEMM: image b's columns start at column b * out_hw
    columns.batch_cols = out_hw;
    gemm_batched(weight_groups.expand({b_count, out_g, rows_g}), columns, out, 1.0, beta);
    return;
  }
  columns.batch_rows = rows_g;  // image by image, the groups the batch: group g's rows start at g * rows_g
  for (int64_t b = 0; b < b_count; ++b) {
    columns.col0 = b * out_hw;
    gemm_batched(weight_groups, columns, out.select(0, b).view({groups, out_g, out_hw}), 1.0, beta);
  }
}

Tensor chunk_weight_grad(const Tensor& grad_by_channel, const RowSource& cols, int64_t rows, int64_t groups) {
  const int64_t out_channels = grad_by_channel.size(0), k = grad_by_channel.size(1);
  const int64_t out_g = out_channels / groups, rows_g = rows / groups;
  const Tensor grad_weight = empty({groups, out_g, rows_g}, grad_by_channel.options());
  // dW_g = dY_g @ cols_g^T: the columns read transposed, group g's rows from g * rows_g.
  SourceOperand columns{&cols};
  columns.batch_rows = rows_g;
  columns.transposed = true;
  gemm_batched(grad_by_channel.view({groups, out_g, k}), columns, grad_weight);
  return grad_weight.view({out_channels, rows_g});
}

void add_chunk(Tensor& total, const Tensor& chunk) {
  if (total.defined())
    add_into(total, chunk);
  else
    total = chunk;
}

}  // namespace minidet::ops::detail
