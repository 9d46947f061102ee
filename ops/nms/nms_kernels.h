// Raw kernels behind nms and batched_nms (nms.cpp validates and calls them). Both take the boxes already in
// score order (nms.cpp sorts), so the two devices share the sort, and the one test both use lives here.
#pragma once

#include <cstdint>
#include <vector>

#include "core/macros.h"
#include "core/tensor.h"
#include "ops/boxes/box_math.h"
#include "ops/nms/nms_mask.h"

namespace minidet::ops::detail {

// Does kept box a suppress box b? "IoU(a, b) > threshold", with box_math's exactly rounded IoU (the same bits
// on host and device; see box_math.h for how FMA contraction is ruled out). The test is symmetric in a and b
// bit for bit (max, min, * and the sum of the two areas are all commutative), so it does not matter which
// side asks. Boxes that do not overlap along x have IoU 0 and are rejected before the division: the same
// answer, only sooner (threshold >= 0).
template <typename T>
MINIDET_HOST_DEVICE inline bool suppresses(const T* a, T area_a, const T* b, T area_b, T threshold, T offset) {
  const T overlap_x = box_math::clamped_extent(box_math::max_of(a[0], b[0]), box_math::min_of(a[2], b[2]), offset);
  if (!(overlap_x > T(0))) return false;
  return box_math::box_iou_with_areas(a, area_a, b, area_b, offset) > threshold;
}

struct NmsArgs {
  Tensor boxes;      // (N, 4) float32/float64, contiguous, in input order
  Tensor scores;     // (N), contiguous: only checked for finite values here (the order comes from it)
  Tensor class_ids;  // (N) int64 contiguous for batched_nms; undefined for nms
  Tensor order;      // (N) int64: input indices by descending score (stable); segmented: within each segment
  double iou_threshold = 0;
  int offset = 0;
  int64_t segments = 1;  // > 1: N / segments consecutive rows per segment, each an NMS of its own (mask mode)
};

// The kept input indices (int64, on the boxes' device), in order. Throws minidet::Error naming `op` when a
// coordinate or score is NaN or Inf (both devices find out while gathering the boxes into score order).
Tensor nms_kernel(const char* op, const NmsArgs& args);
Tensor nms_cpu(const char* op, const NmsArgs& args);
#if MINIDET_WITH_CUDA
Tensor nms_cuda(const char* op, const NmsArgs& args);
#endif

// The mask form (nms_mask.h) on CUDA: args as nms_kernel's, or segmented (args.segments > 1).
#if MINIDET_WITH_CUDA
NmsMask nms_mask_cuda(const char* op, const NmsArgs& args);
#endif

}  // namespace minidet::ops::detail
