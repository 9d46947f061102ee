// box_iou: validation, the autograd record and the device switch (math in box_iou.h, kernels in
// box_iou_kernels.h).
#include "ops/boxes/box_iou.h"

#include "autograd/function.h"
#include "core/factories.h"
#include "ops/boxes/box_checks.h"
#include "ops/boxes/box_iou_kernels.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"

namespace minidet {
namespace {

void validate(const Tensor& boxes1, const Tensor& boxes2) {
  const char* op = "box_iou";
  ops::detail::check_boxes(op, boxes1, "boxes1", "(N, 4)");
  ops::detail::check_boxes(op, boxes2, "boxes2", "(M, 4)");
  ops::check_dim(op, boxes1, "boxes1 (N, 4)", 2);
  ops::check_dim(op, boxes2, "boxes2 (M, 4)", 2);
  ops::check_same_dtype(op, boxes1, "boxes1", boxes2, "boxes2");
  ops::check_same_device(op, boxes1, "boxes1", boxes2, "boxes2");
}

Tensor forward_raw(const Tensor& boxes1, const Tensor& boxes2) {
  NoGradGuard raw;
  Tensor iou = empty({boxes1.size(0), boxes2.size(0)}, boxes1.options());
  if (iou.numel() == 0) return iou;
  const Tensor a = boxes1.contiguous(), b = boxes2.contiguous();
  MINIDET_DEVICE_SWITCH(a, ops::detail::box_iou_forward_cpu(a, b, iou), ops::detail::box_iou_forward_cuda(a, b, iou));
  return iou;
}

// Zero-filled gradients for empty inputs; otherwise the kernels write every element.
autograd::TensorList backward_raw(const Tensor& grad_any, const Tensor& boxes1, const Tensor& boxes2,
                                  bool need_a, bool need_b) {
  NoGradGuard raw;
  const bool empty_pairs = boxes1.size(0) == 0 || boxes2.size(0) == 0;
  const auto make = [&](bool needed, const Tensor& like) {
    if (!needed) return Tensor();
    return empty_pairs ? zeros(like.sizes(), like.options()) : empty(like.sizes(), like.options());
  };
  Tensor grad_a = make(need_a, boxes1), grad_b = make(need_b, boxes2);
  if (empty_pairs || (!need_a && !need_b)) return {grad_a, grad_b};
  const Tensor grad = grad_any.contiguous(), a = boxes1.contiguous(), b = boxes2.contiguous();
  MINIDET_DEVICE_SWITCH(a, ops::detail::box_iou_backward_cpu(a, b, grad, grad_a, grad_b),
                        ops::detail::box_iou_backward_cuda(a, b, grad, grad_a, grad_b));
  return {grad_a, grad_b};
}

}  // namespace

Tensor box_iou(const Tensor& boxes1, const Tensor& boxes2) {
  validate(boxes1, boxes2);
  Tensor iou = forward_raw(boxes1, boxes2);
  // Saved: both box sets (the backward recomputes every pair's areas and overlap instead of keeping N x M
  // intermediates alive).
  autograd::record("box_iou", {boxes1, boxes2}, {iou}, {boxes1, boxes2},
                   [](autograd::BackwardContext& ctx, const autograd::TensorList& grads) -> autograd::TensorList {
                     return backward_raw(grads[0], ctx.saved(0), ctx.saved(1), ctx.needs_input_grad(0),
                                         ctx.needs_input_grad(1));
                   });
  return iou;
}

}  // namespace minidet
