// Box arithmetic shared by every CPU and CUDA kernel that measures boxes (box_iou, nms, the data layer's
// evaluation), header-only and callable from host and device code.
//
// Boxes are 4 contiguous coordinates (x1, y1, x2, y2), continuous pixels (DESIGN.md). With the legacy
// offset (0 or 1; 1 reproduces the "+1" pixel-count widths of the original Faster R-CNN code):
//
//   width(b)        = max(x2 - x1 + offset, 0)          an inverted box covers nothing
//   area(b)         = width(b) * height(b)
//   inter(a, b)     = max(min(a.x2, b.x2) - max(a.x1, b.x1) + offset, 0) * (the same along y)
//   IoU(a, b)       = inter / (area(a) + area(b) - inter),   and 0 when inter == 0
//
// The last rule is the zero-area policy: a box with zero area (or two disjoint boxes) has IoU 0 with
// everything, never 0/0 = NaN. When inter > 0 both areas are > 0 and the union is >= each of them, so the
// division is always by a positive number.
//
// Why the explicit rounding helpers. NMS compares IoU > threshold, so a CPU and a CUDA NMS agree only if
// they compute bit-identical IoUs. IEEE-754 makes each +, -, *, / exactly rounded, so the same sequence of
// operations gives the same bits on both sides, but two things can change the sequence:
//   - nvcc contracts a * b + c into one fused multiply-add by default (--fmad=true): the product is not
//     rounded, so area(a) + area(b) - inter would differ from the host's in the last bit. Under
//     __CUDA_ARCH__ we therefore use the _rn intrinsics (__fmul_rn, __fadd_rn, ... and __dmul_rn, ...),
//     which the compiler promises never to fuse.
//   - a host compiler that may emit FMA (GCC with -mfma / -march=native, or on aarch64, where it defines
//     __FP_FAST_FMA) fuses as well (GCC's default is -ffp-contract=fast). The x86-64 baseline that minidet
//     builds for has no FMA instruction, so plain operators are exact there; where FMA is available we pass
//     each product through an empty asm statement, which makes the rounded value opaque to the optimiser
//     so it cannot be folded into an FMA.
// min/max are written as comparisons (not fminf/fmin) so NaN handling is the same everywhere; the callers
// validate that coordinates are finite.
#pragma once

#include "core/macros.h"

namespace minidet::box_math {

// ---- exactly rounded arithmetic, identical on host and device -------------------------------------

#if !defined(__CUDA_ARCH__) && (defined(__FP_FAST_FMA) || defined(__FP_FAST_FMAF))
template <typename T>
inline T opaque_on_host(T value) {
  __asm__("" : "+m"(value));  // forces the rounded product to exist, so it cannot become part of an FMA
  return value;
}
#else
template <typename T>
MINIDET_HOST_DEVICE inline T opaque_on_host(T value) {
  return value;
}
#endif

// Each helper is one IEEE-754 operation, rounded to nearest, never fused with its neighbours. T is float or
// double; the device branch picks the intrinsic of that width.
template <typename T>
MINIDET_HOST_DEVICE inline T mul_rn(T a, T b) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(T) == sizeof(float)) return __fmul_rn(a, b); else return __dmul_rn(a, b);
#else
  return opaque_on_host(a * b);
#endif
}
template <typename T>
MINIDET_HOST_DEVICE inline T add_rn(T a, T b) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(T) == sizeof(float)) return __fadd_rn(a, b); else return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
template <typename T>
MINIDET_HOST_DEVICE inline T sub_rn(T a, T b) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(T) == sizeof(float)) return __fsub_rn(a, b); else return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
template <typename T>
MINIDET_HOST_DEVICE inline T div_rn(T a, T b) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(T) == sizeof(float)) return __fdiv_rn(a, b); else return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

template <typename T>
MINIDET_HOST_DEVICE inline T max_of(T a, T b) {
  return a > b ? a : b;
}
template <typename T>
MINIDET_HOST_DEVICE inline T min_of(T a, T b) {
  return a < b ? a : b;
}

// ---- box measures --------------------------------------------------------------------------------

// max(high - low + offset, 0): a box's width or height, or an overlap's.
template <typename T>
MINIDET_HOST_DEVICE inline T clamped_extent(T low, T high, T offset = T(0)) {
  return max_of(add_rn(sub_rn(high, low), offset), T(0));
}

template <typename T>
MINIDET_HOST_DEVICE inline T box_area(const T* box, T offset = T(0)) {
  return mul_rn(clamped_extent(box[0], box[2], offset), clamped_extent(box[1], box[3], offset));
}

template <typename T>
MINIDET_HOST_DEVICE inline T intersection_area(const T* a, const T* b, T offset = T(0)) {
  const T overlap_width = clamped_extent(max_of(a[0], b[0]), min_of(a[2], b[2]), offset);
  const T overlap_height = clamped_extent(max_of(a[1], b[1]), min_of(a[3], b[3]), offset);
  return mul_rn(overlap_width, overlap_height);
}

// IoU when both areas are already known (NMS computes each box's area once, not once per pair). The
// areas must come from box_area with the same offset.
template <typename T>
MINIDET_HOST_DEVICE inline T box_iou_with_areas(const T* a, T area_a, const T* b, T area_b, T offset = T(0)) {
  const T inter = intersection_area(a, b, offset);
  if (!(inter > T(0))) return T(0);
  return div_rn(inter, sub_rn(add_rn(area_a, area_b), inter));
}

template <typename T>
MINIDET_HOST_DEVICE inline T box_iou(const T* a, const T* b, T offset = T(0)) {
  return box_iou_with_areas(a, box_area(a, offset), b, box_area(b, offset), offset);
}

}  // namespace minidet::box_math
