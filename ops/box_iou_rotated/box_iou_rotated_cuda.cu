// CUDA box_iou_rotated: one thread per pair (i, j) over the flattened (N, M) matrix, with the 64-bit
// grid-stride loop. Consecutive threads share a row i (the same box a_i, a broadcast read) and walk
// consecutive boxes b_j, so the writes to iou are coalesced. The per-pair math is rotated_box_math.h's, the
// same function the CPU runs; its polygons (2 x 20 points) live in each thread's local memory.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "ops/box_iou_rotated/box_iou_rotated_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
__global__ void box_iou_rotated_kernel(const T* a, const T* b, T* iou, int64_t n, int64_t m) {
  MINIDET_KERNEL_LOOP(k, n * m) {
    const int64_t i = k / m, j = k - i * m;
    iou[k] = box_iou_rotated_pair(a + 5 * i, b + 5 * j);
  }
}

}  // namespace

void box_iou_rotated_cuda(const Tensor& a, const Tensor& b, const Tensor& iou) {
  cuda::DeviceGuard guard(a.device());
  const int64_t n = a.size(0), m = b.size(0);
  MINIDET_DISPATCH_FLOATING(a.dtype(), "box_iou_rotated", [&] {
    box_iou_rotated_kernel<scalar_t><<<cuda::blocks_for(n * m), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        a.data<scalar_t>(), b.data<scalar_t>(), iou.data<scalar_t>(), n, m);
    MINIDET_CUDA_LAUNCH_CHECK("box_iou_rotated_kernel");
  });
}

}  // namespace minidet::ops::detail
