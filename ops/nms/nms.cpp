// nms and batched_nms: validation, the stable score sort (shared by both devices), the device switch.
// Values (NaN or Inf coordinates and scores) are checked by the kernels while they gather the boxes into
// score order: on CUDA that check rides on the one copy NMS makes anyway (the kept count), so validating
// costs no extra synchronisation.
#include "ops/nms/nms.h"

#include <algorithm>
#include <vector>

#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/common/device_switch.h"
#include "ops/nms/nms_checks.h"
#include "ops/nms/nms_kernels.h"
#include "ops/nms/nms_mask.h"

namespace minidet {

namespace ops::detail {

Tensor nms_kernel(const char* op, const NmsArgs& args) {
  return MINIDET_DEVICE_SWITCH(args.boxes, nms_cpu(op, args), nms_cuda(op, args));
}

}  // namespace ops::detail

namespace {

void check_nms_inputs(const char* op, const Tensor& boxes, const Tensor& scores, double iou_threshold,
                      int offset) {
  ops::check_defined(op, boxes, "boxes");
  ops::check_defined(op, scores, "scores");
  ops::check_floating(op, boxes, "boxes");
  MINIDET_CHECK(boxes.dim() == 2 && boxes.size(1) == 4, op, ": expected boxes of shape (N, 4), got ",
                boxes.sizes());
  ops::detail::check_nms_scores(op, boxes, scores, iou_threshold);
  MINIDET_CHECK(offset == 0 || offset == 1, op, ": expected offset 0 or 1 (1: legacy +1 widths), got ", offset);
}

// The kernels' arguments: contiguous inputs and the stable score order (N > 0). With segments > 1, the order
// is each segment's own (indices within the segment).
ops::detail::NmsArgs sorted_args(const Tensor& boxes, const Tensor& scores, const Tensor& class_ids,
                                 double iou_threshold, int offset, int64_t segments = 1) {
  ops::detail::NmsArgs args;
  args.boxes = boxes.contiguous();
  args.scores = scores.contiguous();
  if (class_ids.defined()) args.class_ids = class_ids.contiguous();
  args.iou_threshold = iou_threshold;
  args.offset = offset;
  args.segments = segments;
  args.order = ops::detail::nms_score_order(args.scores, segments);
  return args;
}

Tensor run_nms(const char* op, const Tensor& boxes, const Tensor& scores, const Tensor& class_ids,
               double iou_threshold, int offset) {
  NoGradGuard raw;  // indices only: nothing to record, and the inputs may require grad
  if (boxes.size(0) == 0) return empty({0}, TensorOptions(kInt64, boxes.device()));
  return ops::detail::nms_kernel(op, sorted_args(boxes, scores, class_ids, iou_threshold, offset));
}

// The mask form on the CPU: the list (a bad value throws here), as a mask; no synchronisation to save.
NmsMask nms_mask_cpu(const char* op, const ops::detail::NmsArgs& args) {
  return ops::detail::mask_of_kept(args.boxes.size(0), ops::detail::nms_cpu(op, args));
}

// segmented_nms_mask on the CPU: batched NMS with the segment as the class, which is what the definition says.
NmsMask segments_as_classes(const Tensor& boxes, const Tensor& scores, int64_t segments, double iou_threshold) {
  return batched_nms_mask(boxes, scores, ops::detail::segment_class_ids(boxes.size(0), segments, boxes.device()),
                          iou_threshold);
}

}  // namespace

Tensor nms(const Tensor& boxes, const Tensor& scores, double iou_threshold, int offset) {
  check_nms_inputs("nms", boxes, scores, iou_threshold, offset);
  return run_nms("nms", boxes, scores, Tensor(), iou_threshold, offset);
}

Tensor batched_nms(const Tensor& boxes, const Tensor& scores, const Tensor& class_ids, double iou_threshold,
                   int offset) {
  check_nms_inputs("batched_nms", boxes, scores, iou_threshold, offset);
  ops::detail::check_nms_class_ids("batched_nms", boxes, class_ids);
  return run_nms("batched_nms", boxes, scores, class_ids, iou_threshold, offset);
}

NmsMask batched_nms_mask(const Tensor& boxes, const Tensor& scores, const Tensor& class_ids, double iou_threshold) {
  const char* op = "batched_nms_mask";
  check_nms_inputs(op, boxes, scores, iou_threshold, 0);
  ops::detail::check_nms_class_ids(op, boxes, class_ids);
  NoGradGuard raw;
  if (boxes.size(0) == 0) return ops::detail::nothing_kept(0, boxes.device());
  const ops::detail::NmsArgs args = sorted_args(boxes, scores, class_ids, iou_threshold, 0);
  return MINIDET_DEVICE_SWITCH(boxes, nms_mask_cpu(op, args), ops::detail::nms_mask_cuda(op, args));
}

NmsMask segmented_nms_mask(const Tensor& boxes, const Tensor& scores, int64_t segments, double iou_threshold) {
  const char* op = "segmented_nms_mask";
  check_nms_inputs(op, boxes, scores, iou_threshold, 0);
  const int64_t n = boxes.size(0);
  ops::detail::check_nms_segments(op, n, segments);
  NoGradGuard raw;
  if (n == 0) return ops::detail::nothing_kept(0, boxes.device());
  return MINIDET_DEVICE_SWITCH(
      boxes, segments_as_classes(boxes, scores, segments, iou_threshold),
      ops::detail::nms_mask_cuda(op, sorted_args(boxes, scores, Tensor(), iou_threshold, 0, segments)));
}

void check_nms_status(const char* op, const std::vector<int64_t>& status) {
  MINIDET_CHECK(status.size() == 2, op, ": expected NMS's status (count, flags), got ", status.size(), " values");
  MINIDET_CHECK(!(status[1] & kNmsBadBoxFlag), op, ": boxes contain NaN or Inf; expected finite coordinates");
  MINIDET_CHECK(!(status[1] & kNmsBadScoreFlag), op, ": scores contain NaN or Inf; expected finite scores");
}

}  // namespace minidet
