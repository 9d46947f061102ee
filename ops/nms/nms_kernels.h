// Raw kernels behind nms and batched_nms (nms.cpp validates and calls them). Both take the boxes already in
// score order (nms.cpp sorts), so the two devices share the sort, and the one pair test both use lives here.
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
// side asks.
//
// iou_above is the test on coordinates passed one by one, without a branch, so that the CPU's pass, which
// keeps its boxes in one array per coordinate, tests one box against many in a loop the compiler vectorises.
// Boxes that do not overlap have inter = 0, hence an IoU of 0, or 0 / 0 = NaN for two empty boxes: neither is
// above a threshold >= 0. suppresses is the same test on two (x1, y1, x2, y2) boxes for the CUDA mask, which
// rejects a pair that does not overlap along x before the division: the same answer, only sooner.
template <typename T>
MINIDET_HOST_DEVICE inline bool iou_above(T ax1, T ay1, T ax2, T ay2, T area_a, T bx1, T by1, T bx2, T by2, T area_b,
                                          T threshold, T offset) {
  using namespace box_math;
  const T width = clamped_extent(max_of(ax1, bx1), min_of(ax2, bx2), offset);
  const T height = clamped_extent(max_of(ay1, by1), min_of(ay2, by2), offset);
  const T inter = mul_rn(width, height);
  return div_rn(inter, sub_rn(add_rn(area_a, area_b), inter)) > threshold;
}

template <typename T>
MINIDET_HOST_DEVICE inline bool suppresses(const T* a, T area_a, const T* b, T area_b, T threshold, T offset) {
  const T overlap_x = box_math::clamped_extent(box_math::max_of(a[0], b[0]), box_math::min_of(a[2], b[2]), offset);
  if (!(overlap_x > T(0))) return false;
  return iou_above(a[0], a[1], a[2], a[3], area_a, b[0], b[1], b[2], b[3], area_b, threshold, offset);
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
