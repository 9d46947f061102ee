// Rotated NMS as a keep mask, with no host synchronisation: segmented_nms_rotated_mask and
// batched_nms_rotated_mask, ops/nms/nms_mask.h's contract with nms_rotated's IoU.
//
//   m = batched_nms_rotated_mask(boxes, scores, class_ids, t)   boxes (N, 5), scores (N), class_ids (N) int64
//   m.keep_mask[i] = true  <=>  batched_nms_rotated(boxes, scores, class_ids, t) keeps row i        (N) bool
//   m.status               = (kept count, bad-input flags kNmsBadBoxFlag | kNmsBadScoreFlag)       (2) int64
//
//   m = segmented_nms_rotated_mask(boxes, scores, S, t)  =  batched_nms_rotated_mask with class_ids[i] = i / R:
//   NMS within each of S equal runs of R = N / S consecutive rows (a rotated detector's images), which never
//   suppress each other. Within a run the rule is nms_rotated.h's: in descending score order (ties in input
//   order), a row is kept unless a kept row of its run has rotated IoU > t with it (IoU == t keeps it).
//
// Boxes are rows (cx, cy, w, h, angle) as in nms_rotated.h, any finite angle. N must be a multiple of S >= 1;
// N = 0 gives an empty mask and status (0, 0). No gradient (inputs that require grad are fine).
//
// Bad values. On CUDA a NaN or Inf box value or score sets its flag in status[1] and the call returns
// normally (the mask is then meaningless); check_nms_status (nms_mask.h) throws what nms_rotated would have
// thrown, once the caller copies the status anyway. On the CPU such an input throws at once, naming the op
// and the row, and the flags are 0.
//
// How. The CPU runs the definition: batched NMS with the run as the class (nms_rotated's greedy pass, its list
// turned into a mask). On CUDA the scores are sorted within each run (one segmented sort, order indices within
// the run), the gather kernel maps score position p to input row (p / R) R + order[p] and prepares the box,
// the mask kernel tests only each run's own 64-box tiles, and ops/nms's greedy walk runs one thread block per
// run, side by side, marking the kept rows. Nothing is copied to the host. As for nms_rotated, CPU and CUDA
// agree except where a pair's IoU lies within the last bits of sin and cos of the threshold.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/nms/nms_mask.h"

namespace minidet {

// Shapes, dtypes, devices and the threshold are checked here, values by the kernels (through status on CUDA).
NmsMask batched_nms_rotated_mask(const Tensor& boxes, const Tensor& scores, const Tensor& class_ids,
                                 double iou_threshold);
// N must be a multiple of segments >= 1.
NmsMask segmented_nms_rotated_mask(const Tensor& boxes, const Tensor& scores, int64_t segments,
                                   double iou_threshold);

}  // namespace minidet
