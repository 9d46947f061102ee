// deform_conv2d: validation, the chunked deformable im2col + GEMM forward and backward (formulas in
// deform_conv2d.h), the autograd record, and dispatch of the kernels to CPU or CUDA.
#include "ops/deform_conv2d/deform_conv2d.h"

#include <algorithm>

#include "autograd/function.h"
#include "core/deterministic.h"
#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"
#include "ops/conv2d/conv2d_lowering.h"
#include "ops/deform_conv2d/deform_conv2d_kernels.h"
#include "ops/matmul/gemm.h"

namespace minidet {
namespace {

using ops::detail::ColumnLayout;
using ops::detail::DeformBackwardOutputs;
using ops::detail::DeformGeometry;

constexpr const char* kDeformConv2dOp = "deform_conv2d";

void check_operand(const Tensor& input, const Tensor& t, const char* name) {
  ops::check_same_dtype(kDeformConv2dOp, input, "input", t, name);
  ops::check_same_device(kDeformConv2dOp, input, "input", t, name);
}

// A per-sample tensor (offset or mask) must have `channels` channels and the output's batch and size.
void check_per_sample(const Tensor& t, const char* name, int64_t channels, const char* channels_rule,
                      int64_t batch, const DeformGeometry& g) {
  MINIDET_CHECK(t.size(1) == channels, "deform_conv2d: expected ", name, " with ", channels, " channels (",
                channels_rule, "), got ", name, " of shape ", t.sizes());
  MINIDET_CHECK(t.size(0) == batch && t.size(2) == g.out_h && t.size(3) == g.out_w, "deform_conv2d: expected ",
                name, " of batch ", batch, " and spatial size ", g.out_h, " x ", g.out_w,
                " (the output's), got ", name, " of shape ", t.sizes());
}

DeformGeometry validate(const Tensor& input, const Tensor& offset, const Tensor& weight, const Tensor& bias,
                        const Tensor& mask, const DeformConv2dOptions& o) {
  ops::check_defined(kDeformConv2dOp, input, "input");
  ops::check_defined(kDeformConv2dOp, offset, "offset");
  ops::check_defined(kDeformConv2dOp, weight, "weight");
  ops::check_dim(kDeformConv2dOp, input, "input (N, C_in, H, W)", 4);
  ops::check_dim(kDeformConv2dOp, offset, "offset (N, 2*offset_groups*kh*kw, H_out, W_out)", 4);
  ops::check_dim(kDeformConv2dOp, weight, "weight (C_out, C_in/groups, kh, kw)", 4);
  ops::check_floating(kDeformConv2dOp, input, "input");
  check_operand(input, offset, "offset");
  check_operand(input, weight, "weight");
  if (bias.defined()) {
    check_operand(input, bias, "bias");
    MINIDET_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), "deform_conv2d: expected bias of shape (",
                  weight.size(0), ",) to match weight.size(0), got ", bias.sizes());
  }
  if (mask.defined()) {
    check_operand(input, mask, "mask");
    ops::check_dim(kDeformConv2dOp, mask, "mask (N, offset_groups*kh*kw, H_out, W_out)", 4);
  }
  ops::detail::check_window(kDeformConv2dOp, o);
  const int64_t in_channels = input.size(1), out_channels = weight.size(0);
  const int64_t kernel_h = weight.size(2), kernel_w = weight.size(3), taps = kernel_h * kernel_w;
  MINIDET_CHECK(kernel_h >= 1 && kernel_w >= 1 && weight.size(1) >= 1,
                "deform_conv2d: expected a non-empty kernel, got weight ", weight.sizes());
  // groups = C_in / (C_in/groups): the weight's second dim must divide the input channels.
  MINIDET_CHECK(in_channels % weight.size(1) == 0, "deform_conv2d: expected input channels C_in = ", in_channels,
                " to be divisible by weight.size(1) = ", weight.size(1), " (C_in/groups), got input ", input.sizes(),
                " and weight ", weight.sizes());
  const int64_t groups = in_channels / weight.size(1);
  MINIDET_CHECK(out_channels % groups == 0, "deform_conv2d: expected out channels weight.size(0) = ", out_channels,
                " divisible by groups = ", groups, " (C_in / weight.size(1))");
  MINIDET_CHECK(offset.size(1) >= 2 * taps && offset.size(1) % (2 * taps) == 0, "deform_conv2d: expected offset ",
                "channels a positive multiple of 2*kh*kw = ", 2 * taps, " (2*offset_groups*kh*kw), got offset ",
                offset.sizes());
  const int64_t offset_groups = offset.size(1) / (2 * taps);
  MINIDET_CHECK(in_channels % offset_groups == 0, "deform_conv2d: expected input channels C_in = ", in_channels,
                " divisible by offset_groups = ", offset_groups, " (offset.size(1) / (2*kh*kw))");
  const DeformGeometry g(ops::detail::conv_geometry(kDeformConv2dOp, input, kernel_h, kernel_w, o), offset_groups);
  const int64_t batch = input.size(0);
  check_per_sample(offset, "offset", 2 * offset_groups * taps, "2*offset_groups*kh*kw", batch, g);
  if (mask.defined()) check_per_sample(mask, "mask", offset_groups * taps, "offset_groups*kh*kw", batch, g);
  return g;
}

// conv2d's bound on the images per chunk, then the chunks evened out: 8 images under a bound of 7 go as 4 + 4,
// not 7 + 1 (a chunk of one image is too little work to fill a GPU).
int64_t chunk_size(const DeformGeometry& g, const Tensor& input, const ConvWindow& window) {
  const int64_t batch = input.size(0);
  const int64_t bytes_per_image = g.column_rows() * g.out_hw() * static_cast<int64_t>(element_size(input.dtype()));
  const int64_t most = ops::detail::images_per_chunk(bytes_per_image, batch, window, input.device());
  const int64_t chunks = (batch + most - 1) / most;
  return chunks <= 1 ? most : (batch + chunks - 1) / chunks;
}

int64_t groups_of(const Tensor& input, const Tensor& weight) { return input.size(1) / weight.size(1); }

Tensor narrow_or_undefined(const Tensor& t, int64_t start, int64_t length) {
  return t.defined() ? t.narrow(0, start, length) : Tensor();
}

void deform_im2col(const Tensor& input, const Tensor& offset, const Tensor& mask, const Tensor& cols,
                   const ColumnLayout& layout, const DeformGeometry& g) {
  MINIDET_DEVICE_SWITCH(input, ops::detail::deform_im2col_cpu(input, offset, mask, cols, layout, g),
                        ops::detail::deform_im2col_cuda(input, offset, mask, cols, layout, g));
}

void deform_col2im(const Tensor& grad_cols, const Tensor& input, const Tensor& offset, const Tensor& mask,
                   const ColumnLayout& layout, const DeformGeometry& g, const DeformBackwardOutputs& out) {
  MINIDET_DEVICE_SWITCH(
      input, ops::detail::deform_col2im_cpu(grad_cols, input, offset, mask, layout, g, out),
      ops::detail::deform_col2im_cuda(grad_cols, input, offset, mask, layout, g, out, DeterministicMode::is_enabled()));
}

// The contiguous operands every raw pass works on (mask undefined for DCNv1).
struct Operands {
  Tensor input, offset, weight, mask;
  Operands(const Tensor& i, const Tensor& o, const Tensor& w, const Tensor& m)
      : input(i.contiguous()), offset(o.contiguous()), weight(w.contiguous()), mask(m.defined() ? m.contiguous() : m) {}
};

Tensor deform_conv2d_forward_raw(const Operands& x, const Tensor& bias, const DeformGeometry& g, int64_t groups,
                                 int64_t chunk) {
  const int64_t batch = x.input.size(0), out_channels = x.weight.size(0), out_hw = g.out_hw();
  Tensor output = empty({batch, out_channels, g.out_h, g.out_w}, x.input.options());
  if (output.numel() == 0) return output;
  Tensor cols = empty({chunk, g.column_rows(), out_hw}, x.input.options());
  for (int64_t start = 0; start < batch; start += chunk) {
    const int64_t b_count = std::min(chunk, batch - start);
    const Tensor cols_chunk = cols.narrow(0, 0, b_count);
    deform_im2col(x.input.narrow(0, start, b_count), x.offset.narrow(0, start, b_count),
                  narrow_or_undefined(x.mask, start, b_count), cols_chunk, ColumnLayout::per_image(g), g);
    Tensor out_chunk = output.narrow(0, start, b_count).view({b_count, out_channels, out_hw});
    double beta = 0.0;
    if (bias.defined()) {  // start from the bias and let the GEMM add onto it (beta = 1)
      out_chunk.copy_(bias.reshape({1, out_channels, 1}));
      beta = 1.0;
    }
    ops::detail::columns_to_output(x.weight, cols_chunk, out_chunk, groups, beta);
  }
  return output;
}

struct DeformGrads {
  Tensor input, offset, weight, bias, mask;
};

// needs: input, offset, weight, bias, mask (the order of the op's arguments).
DeformGrads deform_conv2d_backward_raw(const Tensor& grad_any, const Operands& x, const DeformGeometry& g,
                                       int64_t groups, int64_t chunk, const bool needs[5]) {
  DeformGrads grads;
  const Tensor grad_out = grad_any.contiguous();
  const int64_t batch = x.input.size(0), out_channels = x.weight.size(0), out_hw = g.out_hw();
  const int64_t rows = g.column_rows();
  const bool need_weight = needs[2], need_mask = needs[4] && x.mask.defined();
  const bool need_bias = needs[3];
  if (need_bias) grads.bias = zeros({out_channels}, x.input.options());  // accumulated over chunks
  if (needs[0]) grads.input = zeros(x.input.sizes(), x.input.options());  // a sum over samples
  // The kernels write every offset and mask gradient element (0 for a sample outside the map).
  if (needs[1]) grads.offset = empty(x.offset.sizes(), x.offset.options());
  if (need_mask) grads.mask = empty(x.mask.sizes(), x.mask.options());
  const bool need_sampling_grads = needs[0] || needs[1] || need_mask;
  if (!need_sampling_grads && !need_weight && !need_bias) return grads;
  // Flat buffers: a chunk of b images uses the first b*rows*out_hw elements, in its own layout.
  Tensor cols = need_weight ? empty({chunk * rows * out_hw}, x.input.options()) : Tensor();
  Tensor grad_cols = need_sampling_grads ? empty({chunk * rows * out_hw}, x.input.options()) : Tensor();
  const Tensor ones_column = need_bias ? ones({chunk * out_hw, 1}, x.input.options()) : Tensor();
  for (int64_t start = 0; start < batch; start += chunk) {
    const int64_t b_count = std::min(chunk, batch - start), k = b_count * out_hw;
    const Tensor grad_chunk = grad_out.narrow(0, start, b_count).view({b_count, out_channels, out_hw});
    const Tensor input = x.input.narrow(0, start, b_count), offset = x.offset.narrow(0, start, b_count);
    const Tensor mask = narrow_or_undefined(x.mask, start, b_count);
    // dY is (b, C_out, out_hw) in memory; one copy puts it in (C_out, b*out_hw), the layout of the columns,
    // which are rows first: the chunk is one (rows, b*out_hw) matrix for the dcols and dW GEMMs below (db
    // reads dY alone). A backward that needs neither dW nor db still pays this copy, for dcols.
    const Tensor grad_by_channel = grad_chunk.transpose(0, 1).contiguous().view({out_channels, k});
    const ColumnLayout layout = ColumnLayout::rows_first(g, b_count);
    const Tensor cols_chunk = need_weight ? cols.narrow(0, 0, rows * k).view({rows, k}) : Tensor();
    if (need_sampling_grads) {
      // dcols_g = W_g^T dY_g, one GEMM per group for the chunk; then one pass over the samples gives dx,
      // d offset, d mask and the columns for dW.
      const Tensor grad_cols_chunk = grad_cols.narrow(0, 0, rows * k);
      const int64_t out_g = out_channels / groups, rows_g = rows / groups;
      ops::gemm_batched(x.weight.view({groups, out_g, rows_g}).transpose(1, 2),
                        grad_by_channel.view({groups, out_g, k}), grad_cols_chunk.view({groups, rows_g, k}));
      DeformBackwardOutputs out;
      out.grad_input = narrow_or_undefined(grads.input, start, b_count);
      out.grad_offset = narrow_or_undefined(grads.offset, start, b_count);
      out.grad_mask = narrow_or_undefined(grads.mask, start, b_count);
      out.cols = cols_chunk;
      deform_col2im(grad_cols_chunk, input, offset, mask, layout, g, out);
    } else if (need_weight) {
      deform_im2col(input, offset, mask, cols_chunk, layout, g);
    }
    if (need_weight)  // dW_g += dY_g (C_out/G, b*out_hw) @ cols_g^T: one K for the chunk (conv2d_lowering.h)
      ops::detail::add_chunk(
          grads.weight, ops::detail::chunk_weight_grad(grad_by_channel, cols_chunk, groups).view(x.weight.sizes()));
    // db += dY (C_out, b*out_hw) @ ones: a matrix-vector product, faster than a generic reduction.
    if (need_bias)
      ops::gemm(grad_by_channel, ones_column.narrow(0, 0, k), grads.bias.view({out_channels, 1}), 1.0, 1.0);
  }
  if (need_weight && !grads.weight.defined()) grads.weight = zeros(x.weight.sizes(), x.weight.options());  // batch 0
  return grads;
}

}  // namespace

int64_t deform_conv2d_chunk_size(const Tensor& input, const Tensor& offset, const Tensor& weight,
                                 const DeformConv2dOptions& options) {
  const DeformGeometry g = validate(input, offset, weight, Tensor(), Tensor(), options);
  return chunk_size(g, input, options);
}

Tensor deform_conv2d(const Tensor& input, const Tensor& offset, const Tensor& weight, const Tensor& bias,
                     const Tensor& mask, const DeformConv2dOptions& options) {
  const DeformGeometry g = validate(input, offset, weight, bias, mask, options);
  const int64_t groups = groups_of(input, weight);
  const int64_t chunk = chunk_size(g, input, options);
  Tensor output;
  {
    NoGradGuard raw;
    output = deform_conv2d_forward_raw(Operands(input, offset, weight, mask), bias, g, groups, chunk);
  }
  // Saved: what recomputing the samples needs (input, offset, mask) and the weight for dcols. Never the
  // columns (see deform_conv2d.h).
  autograd::record(kDeformConv2dOp, {input, offset, weight, bias, mask}, {output}, {input, offset, weight, mask},
                   [g, groups, chunk](autograd::BackwardContext& ctx, const autograd::TensorList& grads)
                       -> autograd::TensorList {
                     NoGradGuard raw;
                     const bool needs[5] = {ctx.needs_input_grad(0), ctx.needs_input_grad(1),
                                            ctx.needs_input_grad(2), ctx.needs_input_grad(3),
                                            ctx.needs_input_grad(4)};
                     const Operands x(ctx.saved(0), ctx.saved(1), ctx.saved(2), ctx.saved(3));
                     DeformGrads d = deform_conv2d_backward_raw(grads[0], x, g, groups, chunk, needs);
                     return {d.input, d.offset, d.weight, d.bias, d.mask};
                   });
  return output;
}

}  // namespace minidet
