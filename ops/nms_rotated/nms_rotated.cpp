// nms_rotated, batched_nms_rotated and their mask forms (nms_rotated_mask.h): validation, the stable score
// sort (shared by both devices), the device switch. As in ops/nms/nms.cpp, values (NaN or Inf in boxes and
// scores) are checked by the kernels while they gather the boxes into score order, so on CUDA the check rides
// on the one copy NMS makes anyway (or, for the masks, on the status the caller copies later).
#include "ops/nms_rotated/nms_rotated.h"

#include "core/factories.h"
#include "core/grad_mode.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"
#include "ops/nms/nms_checks.h"
#include "ops/nms_rotated/nms_rotated_kernels.h"
#include "ops/nms_rotated/nms_rotated_mask.h"

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

// The kernels' arguments: contiguous inputs and the stable score order (N > 0), nms's own (nms_checks.h); with
// segments > 1, each segment's order within the segment.
ops::detail::NmsRotatedArgs sorted_args(const Tensor& boxes, const Tensor& scores, const Tensor& class_ids,
                                        double iou_threshold, int64_t segments = 1) {
  ops::detail::NmsRotatedArgs args;
  args.boxes = boxes.contiguous();
  args.scores = scores.contiguous();
  if (class_ids.defined()) args.class_ids = class_ids.contiguous();
  args.iou_threshold = iou_threshold;
  args.segments = segments;
  args.order = ops::detail::nms_score_order(args.scores, segments);
  return args;
}

Tensor run(const char* op, const Tensor& boxes, const Tensor& scores, const Tensor& class_ids, double iou_threshold) {
  NoGradGuard raw;  // indices only: nothing to record, and the inputs may require grad
  if (boxes.size(0) == 0) return empty({0}, TensorOptions(kInt64, boxes.device()));
  const ops::detail::NmsRotatedArgs args = sorted_args(boxes, scores, class_ids, iou_threshold);
  return MINIDET_DEVICE_SWITCH(boxes, ops::detail::nms_rotated_cpu(op, args), ops::detail::nms_rotated_cuda(op, args));
}

// The mask form: on the CPU the list (a bad value throws there) as a mask, on CUDA the mask itself.
NmsMask run_mask(const char* op, const ops::detail::NmsRotatedArgs& args) {
  return MINIDET_DEVICE_SWITCH(args.boxes,
                               ops::detail::mask_of_kept(args.boxes.size(0), ops::detail::nms_rotated_cpu(op, args)),
                               ops::detail::nms_rotated_mask_cuda(op, args));
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

NmsMask batched_nms_rotated_mask(const Tensor& boxes, const Tensor& scores, const Tensor& class_ids,
                                 double iou_threshold) {
  const char* op = "batched_nms_rotated_mask";
  check_inputs(op, boxes, scores, iou_threshold);
  ops::detail::check_nms_class_ids(op, boxes, class_ids);
  NoGradGuard raw;
  if (boxes.size(0) == 0) return ops::detail::nothing_kept(0, boxes.device());
  return run_mask(op, sorted_args(boxes, scores, class_ids, iou_threshold));
}

NmsMask segmented_nms_rotated_mask(const Tensor& boxes, const Tensor& scores, int64_t segments,
                                   double iou_threshold) {
  const char* op = "segmented_nms_rotated_mask";
  check_inputs(op, boxes, scores, iou_threshold);
  const int64_t n = boxes.size(0);
  ops::detail::check_nms_segments(op, n, segments);
  NoGradGuard raw;
  if (n == 0) return ops::detail::nothing_kept(0, boxes.device());
  // The CPU runs the definition, the segment as the class of batched NMS; CUDA sorts each segment on its own
  // and walks the segments side by side (nms_rotated_mask.h).
  if (!boxes.is_cuda())
    return run_mask(op, sorted_args(boxes, scores, ops::detail::segment_class_ids(n, segments, boxes.device()),
                                    iou_threshold));
  return run_mask(op, sorted_args(boxes, scores, Tensor(), iou_threshold, segments));
}

}  // namespace minidet
