// box_iou_rotated kernels (math in box_iou_rotated.h and rotated_box_math.h). The per-pair IoU below is the
// one function both devices call, so the CPU and CUDA kernels differ only in how they cut the (N, M) work.
#pragma once

#include <cstdint>

#include "core/macros.h"
#include "core/tensor.h"
#include "ops/box_iou_rotated/rotated_box_math.h"

namespace minidet::ops::detail {

// IoU(a, b) for two rows (cx, cy, w, h, angle).
template <typename T>
MINIDET_HOST_DEVICE inline T box_iou_rotated_pair(const T* a, const T* b) {
  return rotated_box_math::rotated_box_iou(a, b);
}

// a (N, 5), b (M, 5), iou (N, M): contiguous, one dtype and device, N, M > 0. Writes every element of iou.
void box_iou_rotated_cpu(const Tensor& a, const Tensor& b, const Tensor& iou);
#if MINIDET_WITH_CUDA
void box_iou_rotated_cuda(const Tensor& a, const Tensor& b, const Tensor& iou);
#endif

}  // namespace minidet::ops::detail
