// CPU box_iou. Forward: one row of the IoU matrix per box of a (parallel over rows). Backward: the two
// gradients are separate passes so that each output element is summed by one thread in a fixed order:
// grad_a is parallel over rows i (summing along j), grad_b parallel over blocks of columns j (each thread
// walks every row i over its own block, so it reads the gradient row by row, contiguously).
#include <algorithm>
#include <vector>

#include "ops/boxes/box_iou_kernels.h"

namespace minidet::ops::detail {
namespace {

constexpr int64_t kParallelAbovePairs = 16384;  // pairs; below this a thread team costs more than the loop
constexpr int64_t kColumnBlock = 64;

template <typename T>
std::vector<T> areas_of(const T* boxes, int64_t count) {
  std::vector<T> areas(count);
  for (int64_t k = 0; k < count; ++k) areas[k] = box_math::box_area(boxes + 4 * k);
  return areas;
}

template <typename T>
void forward_kernel(const T* a, const T* b, T* iou, int64_t n, int64_t m) {
  const std::vector<T> area_b = areas_of(b, m);
#pragma omp parallel for schedule(static) if (n * m > kParallelAbovePairs)
  for (int64_t i = 0; i < n; ++i) {
    const T* box_a = a + 4 * i;
    const T area_a = box_math::box_area(box_a);
    T* row = iou + i * m;
    for (int64_t j = 0; j < m; ++j) row[j] = box_iou_forward_pair(box_a, area_a, b + 4 * j, area_b[j]);
  }
}

template <typename T>
void grad_a_kernel(const T* a, const T* b, const T* grad, T* grad_a, int64_t n, int64_t m) {
#pragma omp parallel for schedule(static) if (n * m > kParallelAbovePairs)
  for (int64_t i = 0; i < n; ++i) {
    T sum[4] = {T(0), T(0), T(0), T(0)};
    for (int64_t j = 0; j < m; ++j) {
      const T g = grad[i * m + j];
      if (g == T(0)) continue;
      const IouPairGrad<T> d = box_iou_backward_pair(a + 4 * i, b + 4 * j, g);
      for (int c = 0; c < 4; ++c) sum[c] += d.a[c];
    }
    for (int c = 0; c < 4; ++c) grad_a[4 * i + c] = sum[c];
  }
}

template <typename T>
void grad_b_kernel(const T* a, const T* b, const T* grad, T* grad_b, int64_t n, int64_t m) {
  const int64_t blocks = (m + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (n * m > kParallelAbovePairs)
  for (int64_t block = 0; block < blocks; ++block) {
    const int64_t begin = block * kColumnBlock, end = std::min(m, begin + kColumnBlock);
    T* out = grad_b + 4 * begin;
    for (int64_t k = 0; k < 4 * (end - begin); ++k) out[k] = T(0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = begin; j < end; ++j) {
        const T g = grad[i * m + j];
        if (g == T(0)) continue;
        const IouPairGrad<T> d = box_iou_backward_pair(a + 4 * i, b + 4 * j, g);
        for (int c = 0; c < 4; ++c) grad_b[4 * j + c] += d.b[c];
      }
    }
  }
}

}  // namespace

void box_iou_forward_cpu(const Tensor& a, const Tensor& b, const Tensor& iou) {
  MINIDET_DISPATCH_FLOATING(a.dtype(), "box_iou", [&] {
    forward_kernel<scalar_t>(a.data<scalar_t>(), b.data<scalar_t>(), iou.data<scalar_t>(), a.size(0), b.size(0));
  });
}

void box_iou_backward_cpu(const Tensor& a, const Tensor& b, const Tensor& grad, const Tensor& grad_a,
                          const Tensor& grad_b) {
  MINIDET_DISPATCH_FLOATING(a.dtype(), "box_iou", [&] {
    const scalar_t *a_ptr = a.data<scalar_t>(), *b_ptr = b.data<scalar_t>(), *g = grad.data<scalar_t>();
    if (grad_a.defined()) grad_a_kernel<scalar_t>(a_ptr, b_ptr, g, grad_a.data<scalar_t>(), a.size(0), b.size(0));
    if (grad_b.defined()) grad_b_kernel<scalar_t>(a_ptr, b_ptr, g, grad_b.data<scalar_t>(), a.size(0), b.size(0));
  });
}

}  // namespace minidet::ops::detail
