// Pointwise losses: validation, one fused kernel per direction, the reduction and the autograd record.
// Formulas in pointwise_loss.h.
#include "ops/loss/pointwise_loss.h"

#include "autograd/function.h"
#include "core/broadcast.h"
#include "core/factories.h"
#include "core/reduce_sum.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"
#include "ops/elementwise/binary.h"
#include "ops/elementwise/elementwise_raw.h"
#include "ops/loss/pointwise_loss_kernels.h"

namespace minidet {

using autograd::BackwardContext;
using autograd::TensorList;
using ops::detail::PointwiseLoss;

// ---- device switches -----------------------------------------------------------------------------------

namespace ops::detail {

void pointwise_loss_forward_kernel(PointwiseLoss kind, double beta, const Tensor& loss, const Tensor& input,
                                   const Tensor& target, const Tensor& weight, const Tensor& pos_weight) {
  if (loss.numel() == 0) return;
  MINIDET_DEVICE_SWITCH(loss, pointwise_loss_forward_cpu(kind, beta, loss, input, target, weight, pos_weight),
                        pointwise_loss_forward_cuda(kind, beta, loss, input, target, weight, pos_weight));
}

void pointwise_loss_backward_kernel(PointwiseLoss kind, double beta, const Tensor& grad_input,
                                    const Tensor& grad_target, const Tensor& grad, const Tensor& input,
                                    const Tensor& target, const Tensor& weight, const Tensor& pos_weight) {
  if (grad_input.numel() == 0) return;
  MINIDET_DEVICE_SWITCH(
      grad_input,
      pointwise_loss_backward_cpu(kind, beta, grad_input, grad_target, grad, input, target, weight, pos_weight),
      pointwise_loss_backward_cuda(kind, beta, grad_input, grad_target, grad, input, target, weight, pos_weight));
}

}  // namespace ops::detail

namespace {

void check_pair(const char* op, const Tensor& input, const Tensor& target) {
  ops::check_defined(op, input, "input");
  ops::check_defined(op, target, "target");
  ops::check_floating(op, input, "input");
  ops::check_same_dtype(op, input, "input", target, "target");
  ops::check_same_device(op, input, "input", target, "target");
  MINIDET_CHECK(input.sizes() == target.sizes(), op, ": expected input and target of the same shape, got ",
                input.sizes(), " and ", target.sizes());
}

// An optional per-element factor (weight, pos_weight): undefined means 1.
void check_factor(const char* op, const Tensor& input, const Tensor& factor, const char* name) {
  if (!factor.defined()) return;
  ops::check_same_dtype(op, input, "input", factor, name);
  ops::check_same_device(op, input, "input", factor, name);
  MINIDET_CHECK(broadcastable_to(factor.sizes(), input.sizes()), op, ": ", name, " of shape ", factor.sizes(),
                " does not broadcast to the input's shape ", input.sizes());
}

Tensor pointwise_loss(const char* op, PointwiseLoss kind, const Tensor& input, const Tensor& target,
                      const Tensor& weight, const Tensor& pos_weight, double beta, Reduction reduction) {
  const Shape shape = input.sizes();
  // A missing factor becomes a 0-dim 1 broadcast with stride 0: one kernel serves every combination.
  const Tensor one = ones({}, input.options());
  const Tensor w = weight.defined() ? weight : one;
  const Tensor pw = pos_weight.defined() ? pos_weight : one;
  Tensor loss = empty(shape, input.options());
  {
    NoGradGuard raw;  // expand() is a raw method
    ops::detail::pointwise_loss_forward_kernel(kind, beta, loss, input, target, w.expand(shape), pw.expand(shape));
  }
  const double count = static_cast<double>(input.numel());
  Tensor out = loss;
  if (reduction != Reduction::None) out = sum_dims_raw(loss, {}, false);
  // The mean of nothing divides 0 by 0: NaN, as in PyTorch.
  if (reduction == Reduction::Mean) out = ops::detail::unary_raw(op, ops::UnaryOp::DivScalar, out, count);

  autograd::record(op, {input, target}, {out}, {input, target, w, pw},
                   [kind, beta, reduction, count, shape](BackwardContext& ctx, const TensorList& g) -> TensorList {
                     const Tensor x = ctx.saved(0), t = ctx.saved(1), w = ctx.saved(2), pw = ctx.saved(3);
                     // For sum and mean, one scalar gradient reaches every element: broadcast it (stride 0).
                     const Tensor grad = reduction == Reduction::Mean ? div(g[0], count) : g[0];
                     Tensor grad_input = empty(shape, x.options());
                     Tensor grad_target = ctx.needs_input_grad(1) ? empty(shape, x.options()) : Tensor();
                     ops::detail::pointwise_loss_backward_kernel(kind, beta, grad_input, grad_target,
                                                                 grad.expand(shape), x, t, w.expand(shape),
                                                                 pw.expand(shape));
                     return {ctx.needs_input_grad(0) ? grad_input : Tensor(), grad_target};
                   });
  return out;
}

}  // namespace

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        const BceWithLogitsOptions& options) {
  const char* op = "binary_cross_entropy_with_logits";
  check_pair(op, logits, targets);
  check_factor(op, logits, options.weight, "weight");
  check_factor(op, logits, options.pos_weight, "pos_weight");
  return pointwise_loss(op, PointwiseLoss::BceWithLogits, logits, targets, options.weight, options.pos_weight, 0.0,
                        options.reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, double beta, Reduction reduction) {
  const char* op = "smooth_l1_loss";
  check_pair(op, input, target);
  MINIDET_CHECK(beta >= 0.0, op, ": expected beta >= 0, got ", beta);
  return pointwise_loss(op, PointwiseLoss::SmoothL1, input, target, Tensor(), Tensor(), beta, reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  const char* op = "l1_loss";
  check_pair(op, input, target);
  return pointwise_loss(op, PointwiseLoss::L1, input, target, Tensor(), Tensor(), 0.0, reduction);
}

}  // namespace minidet
