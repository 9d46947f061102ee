// Argument checks that nms.cpp and nms_rotated.cpp share: everything but the boxes' own shape (4 or 5 columns)
// and nms's offset. Each names the op.
#pragma once

#include "core/tensor.h"

namespace minidet::ops::detail {

// scores (N) beside boxes (N, ...): one per box, same device and dtype; iou_threshold finite and >= 0.
void check_nms_scores(const char* op, const Tensor& boxes, const Tensor& scores, double iou_threshold);
// class_ids of batched NMS: defined, int64, (N), on the boxes' device.
void check_nms_class_ids(const char* op, const Tensor& boxes, const Tensor& class_ids);

}  // namespace minidet::ops::detail
