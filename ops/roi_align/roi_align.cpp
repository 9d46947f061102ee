// roi_align: validation, the autograd record (what is saved and why), and dispatch to the CPU or CUDA
// kernels. The math is in roi_align.h.
#include "ops/roi_align/roi_align.h"

#include <cmath>

#include "autograd/function.h"
#include "core/deterministic.h"
#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"
#include "ops/common/roi_checks.h"
#include "ops/roi_align/roi_align_kernels.h"

namespace minidet {

ops::detail::RoiAlignGeometry ops::detail::roi_align_geometry(const Tensor& input, const Tensor& rois,
                                                              const RoIAlignOptions& o) {
  RoiAlignGeometry g;
  g.batch = input.size(0);
  g.channels = input.size(1);
  g.height = input.size(2);
  g.width = input.size(3);
  g.rois = rois.size(0);
  g.pooled_h = o.pooled_h;
  g.pooled_w = o.pooled_w;
  g.spatial_scale = o.spatial_scale;
  g.sampling_ratio = o.sampling_ratio;
  g.aligned = o.aligned;
  g.max_mode = o.pool_mode == RoiPoolMode::Max;
  return g;
}

namespace {

using ops::detail::RoiAlignGeometry;
constexpr const char* kRoIAlignOp = "roi_align";

RoiAlignGeometry validate(const Tensor& input, const Tensor& rois, const RoIAlignOptions& o) {
  ops::check_roi_input(kRoIAlignOp, input);
  MINIDET_CHECK(o.pooled_h >= 1 && o.pooled_w >= 1, kRoIAlignOp, ": expected output size >= 1, got (", o.pooled_h, ", ",
                o.pooled_w, ")");
  MINIDET_CHECK(std::isfinite(o.spatial_scale) && o.spatial_scale > 0, kRoIAlignOp,
                ": expected a finite spatial_scale > 0, got ", o.spatial_scale);
  // Last: on CUDA the value check is the op's one host synchronisation (see ops/common/roi_checks.h).
  ops::check_rois(kRoIAlignOp, input, rois, 5, o.check_roi_values);
  return ops::detail::roi_align_geometry(input, rois, o);
}

struct RoiAlignGrads {
  Tensor input, rois;
};

// Raw backward: both gradients written from scratch (zeros where nothing lands).
RoiAlignGrads roi_align_backward_raw(const Tensor& grad_any, const Tensor& input_any, const Tensor& rois,
                                     const Tensor& argmax, const RoiAlignGeometry& g, const TensorOptions& options,
                                     bool need_input, bool need_rois) {
  NoGradGuard raw;
  RoiAlignGrads grads;
  const Tensor grad_output = grad_any.contiguous();
  if (need_input) grads.input = empty({g.batch, g.channels, g.height, g.width}, options);
  if (need_rois) grads.rois = empty({g.rois, 5}, options);
  const Tensor input = need_rois ? input_any.contiguous() : Tensor();  // only the rois' gradient reads it
  // The CPU computes both gradients in one pass; CUDA has one kernel for each.
  MINIDET_DEVICE_SWITCH(
      options.device, ops::detail::roi_align_backward_cpu(grad_output, input, rois, argmax, grads.input, grads.rois, g),
      [&] {
        if (need_input)
          ops::detail::roi_align_backward_input_cuda(grad_output, rois, argmax, grads.input, g,
                                                     DeterministicMode::is_enabled());
        if (need_rois) ops::detail::roi_align_backward_rois_cuda(grad_output, input, rois, argmax, grads.rois, g);
      }());
  return grads;
}

}  // namespace

Tensor roi_align(const Tensor& input_any, const Tensor& rois_any, const RoIAlignOptions& options) {
  const RoiAlignGeometry g = validate(input_any, rois_any, options);
  Tensor output, argmax, input, rois;
  {
    NoGradGuard raw;  // the raw copies below are not part of the graph; record() below is
    input = input_any.contiguous();
    rois = rois_any.contiguous();
    output = empty({g.rois, g.channels, g.pooled_h, g.pooled_w}, input.options());
    if (g.max_mode) argmax = empty(output.sizes(), TensorOptions(kInt64, input.device()));
    if (output.numel() > 0)
      MINIDET_DEVICE_SWITCH(input, ops::detail::roi_align_forward_cpu(input, rois, output, argmax, g),
                            ops::detail::roi_align_forward_cuda(input, rois, output, argmax, g));
  }
  // Saved: rois (the sample positions), argmax in max mode (the winning samples), and the input only when
  // the rois need a gradient (dv/dy reads the features; the input gradient never does).
  const bool rois_need_grad = rois_any.requires_grad();
  autograd::TensorList saved = {rois, rois_need_grad ? input : Tensor()};
  if (g.max_mode) saved.push_back(argmax);
  const TensorOptions value_options = input.options();
  autograd::record(kRoIAlignOp, {input_any, rois_any}, {output}, saved,
                   [g, value_options](autograd::BackwardContext& ctx, const autograd::TensorList& grads)
                       -> autograd::TensorList {
                     const bool need_input = ctx.needs_input_grad(0), need_rois = ctx.needs_input_grad(1);
                     const Tensor argmax = g.max_mode ? ctx.saved(2) : Tensor();
                     RoiAlignGrads d = roi_align_backward_raw(grads[0], ctx.saved(1), ctx.saved(0), argmax, g,
                                                              value_options, need_input, need_rois);
                     return {d.input, d.rois};
                   });
  return output;
}

}  // namespace minidet
