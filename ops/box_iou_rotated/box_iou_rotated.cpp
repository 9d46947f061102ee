// box_iou_rotated: validation and the device switch (math in box_iou_rotated.h, kernels in
// box_iou_rotated_kernels.h). Nothing is recorded by autograd.
#include "ops/box_iou_rotated/box_iou_rotated.h"

#include "core/error.h"
#include "core/factories.h"
#include "core/grad_mode.h"
#include "ops/box_iou_rotated/box_iou_rotated_kernels.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"

namespace minidet {
namespace {

constexpr const char* kBoxIouRotatedOp = "box_iou_rotated";

void check_rotated_boxes(const Tensor& boxes, const char* arg, const char* shape) {
  ops::check_defined(kBoxIouRotatedOp, boxes, arg);
  MINIDET_CHECK(boxes.dim() == 2 && boxes.size(1) == 5, kBoxIouRotatedOp, ": expected ", arg, " of shape ", shape,
                " with rows (cx, cy, w, h, angle), got shape ", boxes.sizes());
  ops::check_floating(kBoxIouRotatedOp, boxes, arg);
}

}  // namespace

Tensor box_iou_rotated(const Tensor& boxes1, const Tensor& boxes2) {
  check_rotated_boxes(boxes1, "boxes1", "(N, 5)");
  check_rotated_boxes(boxes2, "boxes2", "(M, 5)");
  ops::check_same_dtype(kBoxIouRotatedOp, boxes1, "boxes1", boxes2, "boxes2");
  ops::check_same_device(kBoxIouRotatedOp, boxes1, "boxes1", boxes2, "boxes2");
  // Refused rather than silently cut from the graph: a caller who expects a gradient learns at once.
  const bool grad_mode = GradMode::is_enabled();
  MINIDET_CHECK(!(grad_mode && boxes1.requires_grad()), kBoxIouRotatedOp,
                ": boxes1 requires grad, but box_iou_rotated is not recorded by autograd (detach the boxes: "
                "matching never needs the IoU's gradient)");
  MINIDET_CHECK(!(grad_mode && boxes2.requires_grad()), kBoxIouRotatedOp,
                ": boxes2 requires grad, but box_iou_rotated is not recorded by autograd (detach the boxes: "
                "matching never needs the IoU's gradient)");
  Tensor iou = empty({boxes1.size(0), boxes2.size(0)}, boxes1.options());
  if (iou.numel() == 0) return iou;
  const Tensor a = boxes1.contiguous(), b = boxes2.contiguous();
  MINIDET_DEVICE_SWITCH(a, ops::detail::box_iou_rotated_cpu(a, b, iou), ops::detail::box_iou_rotated_cuda(a, b, iou));
  return iou;
}

}  // namespace minidet
