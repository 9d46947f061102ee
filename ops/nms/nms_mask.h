// NMS as a keep mask, with no host synchronisation: batched_nms_mask and segmented_nms_mask.
//
//   m = batched_nms_mask(boxes, scores, class_ids, t)   boxes (N, 4), scores (N), class_ids (N) int64
//   m.keep_mask[i] = true  <=>  batched_nms(boxes, scores, class_ids, t) keeps row i        (N) bool
//   m.status               = (kept count, bad-input flags)                                 (2) int64
//
//   m = segmented_nms_mask(boxes, scores, S, t)  =  batched_nms_mask with class_ids[i] = i / (N / S):
//   NMS within each of S equal runs of consecutive rows (a detector's images, R = N / S rows each), which
//   never suppress each other. Within a run the rule is nms.h's: in descending score order (ties in input
//   order), a row is kept unless a kept row of its run has IoU > t with it.
//
// Why a mask and a status. nms returns the kept indices, and on CUDA their count is known only on the host:
// one device-to-host copy and a synchronisation per call. A detector's training step makes none, so it takes
// the mask, which stays on the device, and carries the status in a copy it makes later anyway
// (rpn_proposals' per-image counts). Reading the status, check_nms_status throws what nms would have thrown
// on a NaN or Inf coordinate or score; on the CPU such an input throws at once and the flags are 0.
//
// On CUDA, segmented_nms_mask runs each run's greedy pass in its own thread block, side by side, and the
// suppression mask holds only each run's own 64-box tiles: for the RPN's S images x 1,000 rows that is S
// passes over 16 row blocks instead of one pass over 16 S. The bitmask kernel is nms's (nms_cuda.cu).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace minidet {

constexpr int64_t kNmsBadBoxFlag = 1, kNmsBadScoreFlag = 2;  // bits of status[1]

struct NmsMask {
  Tensor keep_mask;  // (N) bool on the boxes' device
  Tensor status;     // (2) int64 on the boxes' device: (kept count, bad-input flags)
};

// Shapes, dtypes, devices and the threshold are checked here, values by the kernels (through status).
NmsMask batched_nms_mask(const Tensor& boxes, const Tensor& scores, const Tensor& class_ids, double iou_threshold);
// N must be a multiple of segments >= 1.
NmsMask segmented_nms_mask(const Tensor& boxes, const Tensor& scores, int64_t segments, double iou_threshold);
// status: the two values of a mask's status, on the host. Throws naming `op` if a flag is set.
void check_nms_status(const char* op, const std::vector<int64_t>& status);

}  // namespace minidet
