// roi_align_rotated: validation, the autograd record (saves only the rois: the backward is linear in the
// upstream gradient and never reads the input), device switch.
#include "autograd/function.h"
#include "core/deterministic.h"
#include "core/factories.h"
#include "core/grad_mode.h"
#include "ops/common/device_switch.h"
#include "ops/common/roi_checks.h"
#include "ops/roi_align_rotated/roi_align_rotated.h"
#include "ops/roi_align_rotated/roi_align_rotated_kernels.h"

namespace minidet {
namespace {

constexpr const char* kRoIAlignRotatedOp = "roi_align_rotated";
using ops::detail::RotatedGeometry;

RotatedGeometry make_geometry(const Tensor& input, const Tensor& rois, const RoIAlignRotatedOptions& options) {
  ops::check_roi_input(kRoIAlignRotatedOp, input);
  ops::check_roi_pooling(kRoIAlignRotatedOp, options.pooled_h, options.pooled_w, options.spatial_scale);
  ops::check_rois(kRoIAlignRotatedOp, input, rois, 6, options.check_roi_values);
  MINIDET_CHECK(!(rois.requires_grad() && GradMode::is_enabled()), kRoIAlignRotatedOp,
                ": the gradient with respect to rois is not supported for the rotated op (only the input "
                "gets one); pass rois.detach()");
  RotatedGeometry g;
  g.num_rois = rois.size(0);
  g.channels = input.size(1);
  g.height = input.size(2);
  g.width = input.size(3);
  g.pooled_h = options.pooled_h;
  g.pooled_w = options.pooled_w;
  g.spatial_scale = options.spatial_scale;
  g.sampling_ratio = options.sampling_ratio;
  g.aligned = options.aligned;
  g.clockwise = options.clockwise;
  return g;
}

Tensor backward_raw(const Tensor& grad_output, const Tensor& rois, const Shape& input_sizes,
                    const RotatedGeometry& g) {
  NoGradGuard raw;
  const Tensor grad = grad_output.contiguous();
  if (grad.numel() == 0) return zeros(input_sizes, grad.options());  // K = 0: no RoI hands back anything
  Tensor grad_input = empty(input_sizes, grad.options());  // the kernels write every element
  if (grad_input.numel() == 0) return grad_input;
  MINIDET_DEVICE_SWITCH(
      grad, ops::detail::roi_align_rotated_backward_cpu(grad, rois, grad_input, g),
      ops::detail::roi_align_rotated_backward_cuda(grad, rois, grad_input, g, DeterministicMode::is_enabled()));
  return grad_input;
}

}  // namespace

Tensor roi_align_rotated(const Tensor& input_any, const Tensor& rois_any, const RoIAlignRotatedOptions& options) {
  const RotatedGeometry g = make_geometry(input_any, rois_any, options);
  Tensor output, rois;
  {
    NoGradGuard raw;
    const Tensor input = input_any.contiguous();
    rois = rois_any.contiguous();
    output = empty({g.num_rois, g.channels, g.pooled_h, g.pooled_w}, input.options());
    if (output.numel() > 0)
      MINIDET_DEVICE_SWITCH(input, ops::detail::roi_align_rotated_forward_cpu(input, rois, output, g),
                            ops::detail::roi_align_rotated_forward_cuda(input, rois, output, g));
  }
  const Shape input_sizes = input_any.sizes();
  autograd::record(kRoIAlignRotatedOp, {input_any}, {output}, {rois},
                   [g, input_sizes](autograd::BackwardContext& ctx, const autograd::TensorList& grads)
                       -> autograd::TensorList { return {backward_raw(grads[0], ctx.saved(0), input_sizes, g)}; });
  return output;
}

}  // namespace minidet
