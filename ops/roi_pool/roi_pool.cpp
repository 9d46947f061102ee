// roi_pool: validation, the autograd record (saves rois and the argmax, not the input), device switch.
#include "autograd/function.h"
#include "core/deterministic.h"
#include "core/factories.h"
#include "ops/common/device_switch.h"
#include "ops/common/roi_checks.h"
#include "ops/roi_pool/roi_pool.h"
#include "ops/roi_pool/roi_pool_kernels.h"

namespace minidet {
namespace {

constexpr const char* kRoIPoolOp = "roi_pool";
using ops::detail::RoIPoolGeometry;

RoIPoolGeometry make_geometry(const Tensor& input, const Tensor& rois, std::array<int64_t, 2> output_size,
                              double spatial_scale, bool check_roi_values) {
  ops::check_roi_input(kRoIPoolOp, input);
  ops::check_roi_pooling(kRoIPoolOp, output_size[0], output_size[1], spatial_scale);
  ops::check_rois(kRoIPoolOp, input, rois, 5, check_roi_values);
  RoIPoolGeometry g;
  g.num_rois = rois.size(0);
  g.channels = input.size(1);
  g.height = input.size(2);
  g.width = input.size(3);
  g.pooled_height = output_size[0];
  g.pooled_width = output_size[1];
  g.spatial_scale = spatial_scale;
  return g;
}

// dx from dy and the saved argmax: every non-empty bin adds its dy at its argmax, into zeros. The kernels
// write all of dx themselves (the CUDA gather writes each element once, so a zero fill first would be waste).
Tensor roi_pool_backward_raw(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                             const Shape& input_sizes, const RoIPoolGeometry& g) {
  NoGradGuard raw;
  const Tensor grad = grad_output.contiguous();
  if (grad.numel() == 0 || shape_numel(input_sizes) == 0) return zeros(input_sizes, grad.options());
  Tensor grad_input = empty(input_sizes, grad.options());
  MINIDET_DEVICE_SWITCH(
      grad, ops::detail::roi_pool_backward_cpu(grad, rois, argmax, grad_input, g),
      ops::detail::roi_pool_backward_cuda(grad, rois, argmax, grad_input, g, DeterministicMode::is_enabled()));
  return grad_input;
}

}  // namespace

RoIPoolResult roi_pool_with_argmax(const Tensor& input_any, const Tensor& rois_any, std::array<int64_t, 2> output_size,
                                   double spatial_scale, bool check_roi_values) {
  const RoIPoolGeometry g = make_geometry(input_any, rois_any, output_size, spatial_scale, check_roi_values);
  RoIPoolResult result;
  Tensor rois;
  {
    NoGradGuard raw;
    const Tensor input = input_any.contiguous();
    rois = rois_any.detach().contiguous();
    const Shape out_sizes = {g.num_rois, g.channels, g.pooled_height, g.pooled_width};
    result.output = empty(out_sizes, input.options());
    result.argmax = empty(out_sizes, TensorOptions(kInt64, input.device()));
    if (result.output.numel() > 0)
      MINIDET_DEVICE_SWITCH(input, ops::detail::roi_pool_forward_cpu(input, rois, result.output, result.argmax, g),
                            ops::detail::roi_pool_forward_cuda(input, rois, result.output, result.argmax, g));
  }
  const Shape input_sizes = input_any.sizes();
  autograd::record(kRoIPoolOp, {input_any, rois_any}, {result.output}, {rois, result.argmax},
                   [g, input_sizes](autograd::BackwardContext& ctx, const autograd::TensorList& grads)
                       -> autograd::TensorList {
                     const Tensor rois = ctx.saved(0);
                     Tensor grad_input, grad_rois;
                     if (ctx.needs_input_grad(0))
                       grad_input = roi_pool_backward_raw(grads[0], rois, ctx.saved(1), input_sizes, g);
                     if (ctx.needs_input_grad(1)) grad_rois = zeros_like(rois);  // piecewise constant (see header)
                     return {grad_input, grad_rois};
                   });
  return result;
}

Tensor roi_pool(const Tensor& input, const Tensor& rois, std::array<int64_t, 2> output_size, double spatial_scale,
                bool check_roi_values) {
  return roi_pool_with_argmax(input, rois, output_size, spatial_scale, check_roi_values).output;
}

}  // namespace minidet
