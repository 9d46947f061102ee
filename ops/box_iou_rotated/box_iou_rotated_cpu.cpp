// CPU box_iou_rotated: one row of the IoU matrix per box of a, rows in parallel (each thread writes its own
// rows, so the result does not depend on the number of threads).
#include "ops/box_iou_rotated/box_iou_rotated_kernels.h"

namespace minidet::ops::detail {
namespace {

// Pairs; a pair costs a few hundred flops (sin, cos, 4 clip passes), so a team pays off sooner than for
// box_iou's few flops per pair.
constexpr int64_t kParallelAboveRotatedPairs = 1024;

template <typename T>
void iou_kernel(const T* a, const T* b, T* iou, int64_t n, int64_t m) {
#pragma omp parallel for schedule(static) if (n * m > kParallelAboveRotatedPairs)
  for (int64_t i = 0; i < n; ++i) {
    T* row = iou + i * m;
    for (int64_t j = 0; j < m; ++j) row[j] = box_iou_rotated_pair(a + 5 * i, b + 5 * j);
  }
}

}  // namespace

void box_iou_rotated_cpu(const Tensor& a, const Tensor& b, const Tensor& iou) {
  MINIDET_DISPATCH_FLOATING(a.dtype(), "box_iou_rotated", [&] {
    iou_kernel<scalar_t>(a.data<scalar_t>(), b.data<scalar_t>(), iou.data<scalar_t>(), a.size(0), b.size(0));
  });
}

}  // namespace minidet::ops::detail
