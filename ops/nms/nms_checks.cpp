// The shared NMS argument checks (nms_checks.h).
#include "ops/nms/nms_checks.h"

#include <cmath>

#include "ops/common/checks.h"

namespace minidet::ops::detail {

void check_nms_scores(const char* op, const Tensor& boxes, const Tensor& scores, double iou_threshold) {
  MINIDET_CHECK(scores.dim() == 1, op, ": expected scores of shape (N), got ", scores.sizes());
  MINIDET_CHECK(scores.size(0) == boxes.size(0), op, ": expected one score per box, got ", boxes.size(0),
                " boxes and ", scores.size(0), " scores");
  check_same_device(op, boxes, "boxes", scores, "scores");
  check_same_dtype(op, boxes, "boxes", scores, "scores");
  MINIDET_CHECK(std::isfinite(iou_threshold) && iou_threshold >= 0, op,
                ": expected a finite iou_threshold >= 0, got ", iou_threshold);
}

void check_nms_class_ids(const char* op, const Tensor& boxes, const Tensor& class_ids) {
  check_defined(op, class_ids, "class_ids");
  MINIDET_CHECK(class_ids.dtype() == kInt64, op, ": expected class_ids of dtype int64, got ", class_ids.dtype(),
                " (floating class ids are refused rather than rounded; convert with .to(kInt64))");
  MINIDET_CHECK(class_ids.dim() == 1 && class_ids.size(0) == boxes.size(0), op,
                ": expected class_ids of shape (N) with N = ", boxes.size(0), " boxes, got ", class_ids.sizes());
  check_same_device(op, boxes, "boxes", class_ids, "class_ids");
}

}  // namespace minidet::ops::detail
