// nms_rotated and batched_nms_rotated: validation, the stable score sort (shared by both devices), the
// device switch. As in ops/nms/nms.cpp, values (NaN or Inf in boxes and scores) are checked by the kernels
// while they gather the boxes into score order, so on CUDA the check rides on the one copy NMS makes anyway.
#include "ops/nms_rotated/nms_rotated.h"

#include "core/factories.h"
#include "core/grad_mode.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"
#include "ops/nms/nms_checks.h"
#include "ops/nms_rotated/nms_rotated_kernels.h"
#include "ops/sort/sort_kernels.h"

namespace minidet {
namespace {

void check_inputs(const char* op, const Tensor& boxes, const Tensor& scores, double iou_threshold) {
  ops::check_defined(op, boxes, "boxes");
  ops::check_defined(op, scores, "scores");
  ops::check_floating(op, boxes, "boxes");
  MINIDET_CHECK(boxes.dim() == 2 && boxes.size(1) == 5, op,
                ": expected boxes of shape (N, 5) with rows (cx, cy, w, h, angle), got ", boxes.sizes());
  ops::detail::check_nms_scores(op, boxes, scores, iou_threshold);
}

Tensor run(const char* op, const Tensor& boxes, const Tensor& scores, const Tensor& class_ids, double iou_threshold) {
  NoGradGuard raw;  // indices only: nothing to record, and the inputs may require grad
  const int64_t n = boxes.size(0);
  if (n == 0) return empty({0}, TensorOptions(kInt64, boxes.device()));
  ops::detail::NmsRotatedArgs args;
  args.boxes = boxes.contiguous();
  args.scores = scores.contiguous();
  if (class_ids.defined()) args.class_ids = class_ids.contiguous();
  args.iou_threshold = iou_threshold;
  // Highest score first, equal scores in input order: sort.h's stable order, the same on both devices (and
  // the same as nms's).
  const Tensor sorted_scores = empty({n}, scores.options());
  args.order = empty({n}, TensorOptions(kInt64, boxes.device()));
  ops::detail::sort_rows(args.scores, ops::row_layout({1, n}, 1), /*descending=*/true, sorted_scores, args.order);
  return MINIDET_DEVICE_SWITCH(boxes, ops::detail::nms_rotated_cpu(op, args), ops::detail::nms_rotated_cuda(op, args));
}

}  // namespace

Tensor nms_rotated(const Tensor& boxes, const Tensor& scores, double iou_threshold) {
  check_inputs("nms_rotated", boxes, scores, iou_threshold);
  return run("nms_rotated", boxes, scores, Tensor(), iou_threshold);
}

Tensor batched_nms_rotated(const Tensor& boxes, const Tensor& scores, const Tensor& class_ids, double iou_threshold) {
  check_inputs("batched_nms_rotated", boxes, scores, iou_threshold);
  ops::detail::check_nms_class_ids("batched_nms_rotated", boxes, class_ids);
  return run("batched_nms_rotated", boxes, scores, class_ids, iou_threshold);
}

}  // namespace minidet
