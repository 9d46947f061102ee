// conv2d: validation, the chunked GEMM forward and backward over the columns (formulas in conv2d.h), the
// autograd record, and the dispatch of the column kernels to CPU (columns never stored) or CUDA (im2col).
#include "ops/conv2d/conv2d.h"

#include <algorithm>

#include "autograd/function.h"
#include "core/factories.h"
#include "core/reduce_sum.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"
#include "ops/conv2d/conv2d_lowering.h"
#include "ops/conv2d/conv2d_kernels.h"

namespace minidet {
namespace {

using ops::detail::ConvGeometry;

ConvGeometry validate(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dOptions& o) {
  const char* op = "conv2d";
  ops::check_defined(op, input, "input");
  ops::check_defined(op, weight, "weight");
  ops::check_dim(op, input, "input (N, C_in, H, W)", 4);
  ops::check_dim(op, weight, "weight (C_out, C_in/groups, kh, kw)", 4);
  ops::check_floating(op, input, "input");
  ops::check_same_dtype(op, input, "input", weight, "weight");
  ops::check_same_device(op, input, "input", weight, "weight");
  if (bias.defined()) {
    ops::check_same_dtype(op, input, "input", bias, "bias");
    ops::check_same_device(op, input, "input", bias, "bias");
    MINIDET_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "conv2d: expected bias of shape (",
                  weight.size(0), ",) to match weight.size(0), got ", bias.sizes());
  }
  ops::detail::check_window(op, o);
  MINIDET_CHECK(o.groups >= 1, "conv2d: groups must be >= 1, got ", o.groups);
  const int64_t out_channels = weight.size(0), kernel_h = weight.size(2), kernel_w = weight.size(3);
  MINIDET_CHECK(kernel_h >= 1 && kernel_w >= 1 && weight.size(1) >= 1, "conv2d: expected a non-empty kernel, got weight ",
                weight.sizes());
  MINIDET_CHECK(out_channels % o.groups == 0, "conv2d: expected out channels weight.size(0) = ", out_channels,
                " divisible by groups = ", o.groups);
  MINIDET_CHECK(input.size(1) == weight.size(1) * o.groups, "conv2d: expected input with ",
                weight.size(1) * o.groups, " channels (weight.size(1) = ", weight.size(1), " times groups = ",
                o.groups, "), got input of shape ", input.sizes());
  return ops::detail::conv_geometry(op, input, kernel_h, kernel_w, o);
}

int64_t chunk_size(const ConvGeometry& g, const Tensor& input, const ConvWindow& window) {
  const int64_t bytes_per_image = g.column_rows() * g.column_cols() * static_cast<int64_t>(element_size(input.dtype()));
  return ops::detail::images_per_chunk(bytes_per_image, input.size(0), window, input.device());
}

void col2im(const Tensor& cols, const Tensor& images, const ConvGeometry& g) {
  MINIDET_DEVICE_SWITCH(images, ops::detail::col2im_cpu(cols, images, g), ops::detail::col2im_cuda(cols, images, g));
}

// Y = W @ cols for a chunk of B images (ops/conv2d/conv2d_lowering.h). On CUDA im2col writes the columns into a
// buffer for the GEMM to read; on the CPU they are never stored: the GEMM packs them straight from the images
// (conv2d_kernels.h), so only CUDA allocates the buffer. The same holds for the weight gradient's columns.
Tensor conv2d_forward_raw(const Tensor& input_any, const Tensor& weight_any, const Tensor& bias,
                          const ConvGeometry& g, int64_t groups, int64_t chunk) {
  NoGradGuard raw;
  const Tensor input = input_any.contiguous(), weight = weight_any.contiguous();
  const int64_t batch = input.size(0), out_channels = weight.size(0), out_hw = g.column_cols();
  Tensor output = empty({batch, out_channels, g.out_h, g.out_w}, input.options());
  if (output.numel() == 0) return output;
  const Tensor cols = input.is_cuda() ? empty({chunk, g.column_rows(), out_hw}, input.options()) : Tensor();
  for (int64_t start = 0; start < batch; start += chunk) {
    const int64_t b_count = std::min(chunk, batch - start);
    const Tensor images = input.narrow(0, start, b_count);
    Tensor out_chunk = output.narrow(0, start, b_count).view({b_count, out_channels, out_hw});
    double beta = 0.0;
    if (bias.defined()) {  // start from the bias and let the GEMM add onto it (beta = 1)
      out_chunk.copy_(bias.reshape({1, out_channels, 1}));
      beta = 1.0;
    }
    MINIDET_DEVICE_SWITCH(
        images,
        ops::detail::columns_to_output(weight, *ops::detail::image_columns_cpu(images, g), out_chunk, groups, beta),
        [&] {
          const Tensor cols_chunk = cols.narrow(0, 0, b_count);
          ops::detail::im2col_cuda(images, cols_chunk, g, ops::detail::ColumnOrder::PerImage);
          ops::detail::columns_to_output(weight, cols_chunk, out_chunk, groups, beta);
        }());
  }
  return output;
}

struct ConvGrads {
  Tensor input, weight, bias;
};

ConvGrads conv2d_backward_raw(const Tensor& grad_any, const Tensor& input_any, const Tensor& weight_any,
                              const ConvGeometry& g, int64_t groups, int64_t chunk, bool need_input,
                              bool need_weight, bool need_bias) {
  NoGradGuard raw;
  ConvGrads grads;
  const Tensor grad_out = grad_any.contiguous();
  const Tensor input = input_any.contiguous(), weight = weight_any.contiguous();
  const int64_t batch = input.size(0), out_channels = weight.size(0), out_hw = g.column_cols();
  const int64_t rows = g.column_rows();
  if (need_bias) grads.bias = sum_dims_raw(grad_out, {0, 2, 3}, false);
  if (need_input) grads.input = batch ? empty(input.sizes(), input.options()) : zeros(input.sizes(), input.options());
  if (!need_input && !need_weight) return grads;
  const Tensor cols = need_weight && input.is_cuda() ? empty({rows * chunk * out_hw}, input.options()) : Tensor();
  Tensor grad_cols = need_input ? empty({chunk, rows, out_hw}, input.options()) : Tensor();
  for (int64_t start = 0; start < batch; start += chunk) {
    const int64_t b_count = std::min(chunk, batch - start);
    const Tensor grad_chunk = grad_out.narrow(0, start, b_count).view({b_count, out_channels, out_hw});
    if (need_weight) {  // dW_g += dY_g @ cols_g^T, the chunk's images and pixels one K (conv2d_lowering.h)
      const Tensor images = input.narrow(0, start, b_count);
      const Tensor grad_by_channel = grad_chunk.transpose(0, 1).contiguous().view({out_channels, b_count * out_hw});
      const Tensor chunk_grad = MINIDET_DEVICE_SWITCH(
          images,
          ops::detail::chunk_weight_grad(grad_by_channel, *ops::detail::image_columns_cpu(images, g), rows, groups),
          [&] {
            const Tensor cols_chunk = cols.narrow(0, 0, rows * b_count * out_hw).view({rows, b_count * out_hw});
            ops::detail::im2col_cuda(images, cols_chunk, g, ops::detail::ColumnOrder::RowsFirst);
            return ops::detail::chunk_weight_grad(grad_by_channel, cols_chunk, groups);
          }());
      ops::detail::add_chunk(grads.weight, chunk_grad.view(weight.sizes()));
    }
    if (need_input) {  // dcols_g = W_g^T @ dY_g, then col2im sums them back onto the pixels
      const Tensor grad_cols_chunk = grad_cols.narrow(0, 0, b_count);
      ops::detail::output_grad_to_columns(weight, grad_chunk, grad_cols_chunk, groups);
      col2im(grad_cols_chunk, grads.input.narrow(0, start, b_count), g);
    }
  }
  if (need_weight && !grads.weight.defined()) grads.weight = zeros(weight.sizes(), weight.options());  // batch 0
  return grads;
}

}  // namespace

int64_t conv2d_chunk_size(const Tensor& input, const Tensor& weight, const Conv2dOptions& options) {
  const ConvGeometry g = validate(input, weight, Tensor(), options);
  return chunk_size(g, input, options);
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options) {
  const ConvGeometry g = validate(input, weight, bias, options);
  const int64_t groups = options.groups;
  const int64_t chunk = chunk_size(g, input, options);
  Tensor output = conv2d_forward_raw(input, weight, bias, g, groups, chunk);
  // Saved: input (to recompute the columns for dW) and weight (for dcols). Never the columns (see conv2d.h).
  autograd::record("conv2d", {input, weight, bias}, {output}, {input, weight},
                   [g, groups, chunk](autograd::BackwardContext& ctx, const autograd::TensorList& grads)
                       -> autograd::TensorList {
                     ConvGrads d = conv2d_backward_raw(grads[0], ctx.saved(0), ctx.saved(1), g, groups, chunk,
                                                       ctx.needs_input_grad(0), ctx.needs_input_grad(1),
                                                       ctx.needs_input_grad(2));
                     return {d.input, d.weight, d.bias};
                   });
  return output;
}

}  // namespace minidet
