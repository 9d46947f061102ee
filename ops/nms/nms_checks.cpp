// The pieces nms.cpp and nms_rotated.cpp share (nms_checks.h).
#include "ops/nms/nms_checks.h"

#include <cmath>
#include <vector>

#include "core/factories.h"
#include "ops/common/checks.h"
#include "ops/sort/sort_kernels.h"

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

void check_nms_segments(const char* op, int64_t n, int64_t segments) {
  MINIDET_CHECK(segments >= 1 && n % segments == 0, op, ": expected a number of segments >= 1 that divides the ",
                n, " boxes, got ", segments);
}

Tensor nms_score_order(const Tensor& scores, int64_t segments) {
  const int64_t n = scores.size(0);
  const Tensor sorted_scores = empty({n}, scores.options());
  const Tensor order = empty({n}, TensorOptions(kInt64, scores.device()));
  sort_rows(scores, row_layout({segments, n / segments}, 1), /*descending=*/true, sorted_scores, order);
  return order;
}

NmsMask nothing_kept(int64_t n, Device device) {
  NmsMask result;
  result.keep_mask = zeros({n}, TensorOptions(kBool, device));
  result.status = zeros({2}, TensorOptions(kInt64, device));
  return result;
}

NmsMask mask_of_kept(int64_t n, const Tensor& kept) {
  NmsMask result = nothing_kept(n, Device::cpu());
  const std::vector<int64_t> rows = kept.to_vector<int64_t>();
  bool* mask = result.keep_mask.data<bool>();
  for (int64_t i : rows) mask[i] = true;
  result.status.data<int64_t>()[0] = static_cast<int64_t>(rows.size());
  return result;
}

Tensor segment_class_ids(int64_t n, int64_t segments, Device device) {
  const int64_t length = n / segments;
  std::vector<int64_t> segment_of(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) segment_of[static_cast<size_t>(i)] = i / length;  // n > 0, so length >= 1
  return from_vector<int64_t>(segment_of).to(device);
}

}  // namespace minidet::ops::detail
