// Raw kernels behind nms_rotated and batched_nms_rotated (nms_rotated.cpp validates, sorts and calls them),
// and the pair test both devices run.
//
// The pair test is box_iou_rotated's IoU (rotated_box_math.h's rotated_box_iou) split in two, so that the
// part with sin and cos runs once per box instead of once per pair:
//   per box   prepare_rotated_box: the centre, the 4 corners relative to the centre (box_corners at the
//             origin: one sin, one cos), their shoelace area and their axis-aligned bounds;
//   per pair  rotated_nms_iou(a, b): b's corners moved to a's frame, d + corner with d = b's centre - a's
//             centre, then rotated_box_iou's steps on them (zero-area and disjoint-bounds rejections, the
//             clip, the shoelace area, the rounding floor, the clamp and the division).
// Why the split changes no bit. rotated_box_iou builds a's corners as box_corners(0, 0, ...) (exactly the
// precomputed ones) and b's as box_corners(d, ...), whose corners are d - (u + v), d + (u - v), d + (u + v),
// d - (u - v) with u + v and u - v rounded first; the precomputed relative corners are 0 - (u + v), u - v,
// u + v, 0 - (u - v), exactly the same numbers up to the sign of a zero, and d + (-x) is d - x in IEEE-754.
// So b's corners, and everything computed from them, are rotated_box_iou's values; a zero's sign never
// changes a comparison, so neither an IoU nor a kept set. The bounds test uses per-box bounds too: rounding
// is monotonic, so the largest of the rounded d + corner_k is the rounded d + (largest corner_k), and the
// test compares the very numbers rotated_box_math's bounds_meet compares. values/nms_rotated checks
// rotated_nms_iou against box_iou_rotated on random boxes, for equality.
#pragma once

#include <cstdint>
#include <limits>

#include "core/macros.h"
#include "core/tensor.h"
#include "ops/box_iou_rotated/rotated_box_math.h"
#include "ops/nms/nms_mask.h"

namespace minidet::ops::detail {

// One box, ready for pair tests. A plain aggregate: the CUDA mask kernel stages 64 of them in shared memory.
template <typename T>
struct RotatedNmsBox {
  T center_x, center_y;
  rotated_box_math::Point<T> corners[4];  // relative to the centre, in box_corners' order
  T low_x, high_x, low_y, high_y;         // the bounds of `corners`
  T area;                                 // polygon_area(corners): |w| |h| up to rounding
};

// box = (cx, cy, w, h, angle), finite.
template <typename T>
MINIDET_HOST_DEVICE inline RotatedNmsBox<T> prepare_rotated_box(const T* box) {
  RotatedNmsBox<T> r;
  r.center_x = box[0];
  r.center_y = box[1];
  rotated_box_math::box_corners(T(0), T(0), box[2], box[3], box[4], r.corners);
  r.area = rotated_box_math::polygon_area(r.corners, 4);
  r.low_x = r.high_x = r.corners[0].x;
  r.low_y = r.high_y = r.corners[0].y;
  for (int k = 1; k < 4; ++k) {
    r.low_x = box_math::min_of(r.low_x, r.corners[k].x), r.high_x = box_math::max_of(r.high_x, r.corners[k].x);
    r.low_y = box_math::min_of(r.low_y, r.corners[k].y), r.high_y = box_math::max_of(r.high_y, r.corners[k].y);
  }
  return r;
}

// rotated_box_iou(a, b) of the boxes a and b were prepared from (see the top of the file), for finite boxes.
template <typename T>
MINIDET_HOST_DEVICE inline T rotated_nms_iou(const RotatedNmsBox<T>& a, const RotatedNmsBox<T>& b) {
  using namespace rotated_box_math;
  const T dx = sub_rn(b.center_x, a.center_x), dy = sub_rn(b.center_y, a.center_y);  // b's centre in a's frame
  // bounds_meet(a's corners, b's corners), from the bounds: most pairs of an NMS stop here, before any corner
  // of b is built.
  if (!(a.low_x <= add_rn(dx, b.high_x) && add_rn(dx, b.low_x) <= a.high_x && a.low_y <= add_rn(dy, b.high_y) &&
        add_rn(dy, b.low_y) <= a.high_y))
    return T(0);
  Point<T> corners_b[4];
  for (int k = 0; k < 4; ++k) corners_b[k] = {add_rn(dx, b.corners[k].x), add_rn(dy, b.corners[k].y)};
  // b's area from its corners in a's frame, as rotated_box_iou computes it (not b.area: the shoelace of the
  // moved corners may round differently, and the intersection of identical boxes equals this one exactly).
  const T area_a = a.area, area_b = polygon_area(corners_b, 4);
  if (!(area_a > T(0)) || !(area_b > T(0))) return T(0);  // zero-area box: IoU 0, not 0/0
  Point<T> overlap[kMaxClipVertices];
  const int count = intersect_quads(a.corners, corners_b, overlap);
  T inter = polygon_area(overlap, count);
  const T floor = mul_rn(T(kEmptyFloor) * std::numeric_limits<T>::epsilon(), add_rn(area_a, area_b));
  if (!(inter > floor)) return T(0);
  inter = min_of(inter, min_of(area_a, area_b));
  return div_rn(inter, sub_rn(add_rn(area_a, area_b), inter));
}

// Does kept box a suppress box b? "IoU(a, b) > threshold", a the better-scored box.
template <typename T>
MINIDET_HOST_DEVICE inline bool rotated_suppresses(const RotatedNmsBox<T>& a, const RotatedNmsBox<T>& b,
                                                   T threshold) {
  return rotated_nms_iou(a, b) > threshold;
}

struct NmsRotatedArgs {
  Tensor boxes;      // (N, 5) float32/float64, contiguous, in input order
  Tensor scores;     // (N), contiguous: only checked for finite values here (the order comes from it)
  Tensor class_ids;  // (N) int64 contiguous for batched_nms_rotated; undefined for nms_rotated
  Tensor order;      // (N) int64: input indices by descending score (stable); segmented: within each segment
  double iou_threshold = 0;
  int64_t segments = 1;  // > 1 (CUDA mask mode): N / segments consecutive rows per segment, each its own NMS
};

// The kept input indices (int64, on the boxes' device), in order; N > 0. Throws minidet::Error naming `op`
// when a box value or a score is NaN or Inf.
Tensor nms_rotated_cpu(const char* op, const NmsRotatedArgs& args);
#if MINIDET_WITH_CUDA
Tensor nms_rotated_cuda(const char* op, const NmsRotatedArgs& args);
// The mask form (nms_rotated_mask.h): args as nms_rotated_cuda's, or segmented (args.segments > 1). Bad values
// are reported through the status, and nothing is copied to the host.
NmsMask nms_rotated_mask_cuda(const char* op, const NmsRotatedArgs& args);
#endif

}  // namespace minidet::ops::detail
