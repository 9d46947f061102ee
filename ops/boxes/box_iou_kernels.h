// box_iou kernels (formulas in box_iou.h). The per-pair forward and backward below are shared by the CPU
// and CUDA kernels, so both devices use exactly the same arithmetic and tie rules; only the order in which
// the backward sums over partners differs between the devices (each is fixed).
#pragma once

#include <cstdint>

#include "core/macros.h"
#include "core/tensor.h"
#include "ops/boxes/box_math.h"

namespace minidet::ops::detail {

template <typename T>
MINIDET_HOST_DEVICE inline bool any_nan4(const T* box) {
  return box[0] != box[0] || box[1] != box[1] || box[2] != box[2] || box[3] != box[3];
}

// IoU(a, b) given both areas (box_math), NaN when a coordinate of either box is NaN.
template <typename T>
MINIDET_HOST_DEVICE inline T box_iou_forward_pair(const T* a, T area_a, const T* b, T area_b) {
  if (any_nan4(a) || any_nan4(b)) return a[0] + a[1] + a[2] + a[3] + b[0] + b[1] + b[2] + b[3];  // a NaN
  return box_math::box_iou_with_areas(a, area_a, b, area_b);
}

// Which share of the gradient of max(p, q) (or min) goes to p: all of it when p alone is the extreme,
// half on a tie, none otherwise. q receives 1 - share.
template <typename T>
MINIDET_HOST_DEVICE inline T share_of_max(T p, T q) {
  return p > q ? T(1) : (p == q ? T(0.5) : T(0));
}
template <typename T>
MINIDET_HOST_DEVICE inline T share_of_min(T p, T q) {
  return p < q ? T(1) : (p == q ? T(0.5) : T(0));
}

template <typename T>
struct IouPairGrad {
  T a[4];
  T b[4];
};

// g * dIoU(a, b)/da and g * dIoU(a, b)/db (box_iou.h derives them).
template <typename T>
MINIDET_HOST_DEVICE inline IouPairGrad<T> box_iou_backward_pair(const T* a, const T* b, T g) {
  IouPairGrad<T> d = {{T(0), T(0), T(0), T(0)}, {T(0), T(0), T(0), T(0)}};
  using box_math::clamped_extent;
  using box_math::max_of;
  using box_math::min_of;
  const T overlap_w = clamped_extent(max_of(a[0], b[0]), min_of(a[2], b[2]));
  const T overlap_h = clamped_extent(max_of(a[1], b[1]), min_of(a[3], b[3]));
  const T inter = overlap_w * overlap_h;
  if (!(inter > T(0))) return d;  // IoU is the constant 0 here (also for NaN boxes)
  const T width_a = a[2] - a[0], height_a = a[3] - a[1];  // both > 0 since the boxes overlap
  const T width_b = b[2] - b[0], height_b = b[3] - b[1];
  const T union_area = width_a * height_a + width_b * height_b - inter;
  const T iou = inter / union_area;
  const T d_inter = g * (T(1) + iou) / union_area;  // g * dIoU/dI
  const T d_area = -g * iou / union_area;           // g * dIoU/darea, the same for both boxes
  const T d_overlap_w = d_inter * overlap_h, d_overlap_h = d_inter * overlap_w;
  // Left/top edges of the overlap are maxima (moving them right shrinks it), right/bottom edges minima.
  const T share_x1 = share_of_max(a[0], b[0]), share_y1 = share_of_max(a[1], b[1]);
  const T share_x2 = share_of_min(a[2], b[2]), share_y2 = share_of_min(a[3], b[3]);
  d.a[0] = -d_overlap_w * share_x1 - d_area * height_a;
  d.a[1] = -d_overlap_h * share_y1 - d_area * width_a;
  d.a[2] = d_overlap_w * share_x2 + d_area * height_a;
  d.a[3] = d_overlap_h * share_y2 + d_area * width_a;
  d.b[0] = -d_overlap_w * (T(1) - share_x1) - d_area * height_b;
  d.b[1] = -d_overlap_h * (T(1) - share_y1) - d_area * width_b;
  d.b[2] = d_overlap_w * (T(1) - share_x2) + d_area * height_b;
  d.b[3] = d_overlap_h * (T(1) - share_y2) + d_area * width_b;
  return d;
}

// a (N, 4), b (M, 4), iou (N, M), grad (N, M), grad_a (N, 4), grad_b (M, 4): contiguous, one dtype and
// device, N, M > 0. Backward writes (never accumulates) grad_a and grad_b; either may be undefined.
void box_iou_forward_cpu(const Tensor& a, const Tensor& b, const Tensor& iou);
void box_iou_backward_cpu(const Tensor& a, const Tensor& b, const Tensor& grad, const Tensor& grad_a,
                          const Tensor& grad_b);
#if MINIDET_WITH_CUDA
void box_iou_forward_cuda(const Tensor& a, const Tensor& b, const Tensor& iou);
void box_iou_backward_cuda(const Tensor& a, const Tensor& b, const Tensor& grad, const Tensor& grad_a,
                           const Tensor& grad_b);
#endif

}  // namespace minidet::ops::detail
