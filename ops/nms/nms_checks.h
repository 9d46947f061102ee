// What nms.cpp and nms_rotated.cpp share besides their kernels: the argument checks (everything but the boxes'
// own shape, 4 or 5 columns, and nms's offset; each names the op), the stable score order, and the pieces of
// the mask form (nms_mask.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/nms/nms_mask.h"

namespace minidet::ops::detail {

// scores (N) beside boxes (N, ...): one per box, same device and dtype; iou_threshold finite and >= 0.
void check_nms_scores(const char* op, const Tensor& boxes, const Tensor& scores, double iou_threshold);
// class_ids of batched NMS: defined, int64, (N), on the boxes' device.
void check_nms_class_ids(const char* op, const Tensor& boxes, const Tensor& class_ids);
// segments of segmented NMS: >= 1 and dividing the n boxes.
void check_nms_segments(const char* op, int64_t n, int64_t segments);

// Highest score first, equal scores in input order: sort.h's stable order, the same on both devices. scores
// (N) contiguous, N > 0; with segments > 1, each run of N / segments rows is sorted on its own and its order
// holds indices within the run. int64, on the scores' device.
Tensor nms_score_order(const Tensor& scores, int64_t segments = 1);

// The mask form's pieces.
// - nothing_kept: an all-false mask of n rows and status (0, no flags), on `device`.
// - mask_of_kept: a CPU list of kept rows (int64) as the mask of n rows and status (count, 0); a CPU kernel
//   throws on bad values before there is a list, so there are no flags to report.
// - segment_class_ids: row i's class is i / R with R = n / segments rows per segment (n > 0): the classes that
//   make batched NMS segmented NMS, as the CPU runs it.
NmsMask nothing_kept(int64_t n, Device device);
NmsMask mask_of_kept(int64_t n, const Tensor& kept);
Tensor segment_class_ids(int64_t n, int64_t segments, Device device);

}  // namespace minidet::ops::detail
