// CUDA softmax kernels: one warp per row (ops/softmax/warp_rows.cuh), the same math as softmax_cpu.cpp.
// Sums accumulate in the tensor's own type.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "ops/softmax/softmax_kernels.h"
#include "ops/softmax/warp_rows.cuh"

namespace minidet::ops::detail {
namespace {

template <typename T>
__global__ void softmax_forward_kernel_cuda(const T* x, RowLayout layout, T* y, bool log) {
  const int64_t n = layout.size, stride = layout.inner;
  MINIDET_WARP_ROW_LOOP(row, lane, layout.rows()) {
    const T* in = x + layout.base(row);
    T* out = y + layout.base(row);
    T m = -INFINITY;
    for (int64_t k = lane; k < n; k += kWarpSize) m = fmax(m, in[k * stride]);
    m = warp_max(m);
    T s = 0;
    for (int64_t k = lane; k < n; k += kWarpSize) s += exp(in[k * stride] - m);
    s = warp_sum(s);
    const T log_s = ::log(s);
    for (int64_t k = lane; k < n; k += kWarpSize) {
      const T shifted = in[k * stride] - m;
      out[k * stride] = log ? shifted - log_s : exp(shifted) / s;
    }
  }
}

template <typename T>
__global__ void softmax_backward_kernel_cuda(const T* y, const T* dy, RowLayout layout, T* dx, bool log) {
  const int64_t n = layout.size, stride = layout.inner;
  MINIDET_WARP_ROW_LOOP(row, lane, layout.rows()) {
    const int64_t base = layout.base(row);
    T dot = 0;  // softmax: sum_j dy_j y_j; log_softmax: sum_j dy_j
    for (int64_t k = lane; k < n; k += kWarpSize) {
      const int64_t i = base + k * stride;
      dot += log ? dy[i] : dy[i] * y[i];
    }
    dot = warp_sum(dot);
    for (int64_t k = lane; k < n; k += kWarpSize) {
      const int64_t i = base + k * stride;
      dx[i] = log ? dy[i] - exp(y[i]) * dot : y[i] * (dy[i] - dot);
    }
  }
}

}  // namespace

void softmax_forward_cuda(const Tensor& x, const RowLayout& layout, const Tensor& y, bool log) {
  cuda::DeviceGuard guard(y.device());
  MINIDET_DISPATCH_FLOATING(x.dtype(), "softmax", [&] {
    softmax_forward_kernel_cuda<scalar_t>
        <<<warp_row_blocks(layout.rows()), kRowsPerBlock * kWarpSize, 0, cuda::current_stream()>>>(
            x.data<scalar_t>(), layout, y.data<scalar_t>(), log);
    MINIDET_CUDA_LAUNCH_CHECK("softmax_forward_kernel_cuda");
  });
}

void softmax_backward_cuda(const Tensor& y, const Tensor& dy, const RowLayout& layout, const Tensor& dx, bool log) {
  cuda::DeviceGuard guard(dx.device());
  MINIDET_DISPATCH_FLOATING(y.dtype(), "softmax backward", [&] {
    softmax_backward_kernel_cuda<scalar_t>
        <<<warp_row_blocks(layout.rows()), kRowsPerBlock * kWarpSize, 0, cuda::current_stream()>>>(
            y.data<scalar_t>(), dy.data<scalar_t>(), layout, dx.data<scalar_t>(), log);
    MINIDET_CUDA_LAUNCH_CHECK("softmax_backward_kernel_cuda");
  });
}

}  // namespace minidet::ops::detail
