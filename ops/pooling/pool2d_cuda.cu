// CUDA pooling kernels. Forward: one thread per output element. Backward: one thread per INPUT element that
// gathers from the output windows containing it (pool2d_kernels.h computes their range), in the same
// (p, q) order as the CPU scatter: no atomics, deterministic, and bit-identical to the CPU in float64.
#include <math_constants.h>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "ops/pooling/pool2d_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
__global__ void max_forward_kernel(int64_t n, const T* in, T* out, int64_t* indices, PoolGeometry g) {
  MINIDET_KERNEL_LOOP(e, n) {
    const int64_t q = e % g.out_w, p = (e / g.out_w) % g.out_h, plane = e / (g.out_h * g.out_w);
    const T* src = in + plane * g.height * g.width;
    const int64_t h_start = p * g.stride_h - g.pad_h, w_start = q * g.stride_w - g.pad_w;
    const int64_t h0 = h_start > 0 ? h_start : 0, w0 = w_start > 0 ? w_start : 0;
    const int64_t h1 = h_start + g.kernel_h < g.height ? h_start + g.kernel_h : g.height;
    const int64_t w1 = w_start + g.kernel_w < g.width ? w_start + g.kernel_w : g.width;
    T best = -CUDART_INF;
    int64_t best_index = h0 * g.width + w0;
    for (int64_t y = h0; y < h1; ++y)
      for (int64_t x = w0; x < w1; ++x) {
        const T v = src[y * g.width + x];
        if (v > best || isnan(v)) {  // same rule as the CPU: first maximum wins, NaN propagates
          best = v;
          best_index = y * g.width + x;
        }
      }
    out[e] = best;
    indices[e] = best_index;
  }
}

template <typename T>
__global__ void max_backward_kernel(int64_t n, const T* grad_out, const int64_t* indices, T* grad_in,
                                    PoolGeometry g) {
  MINIDET_KERNEL_LOOP(e, n) {
    const int64_t x = e % g.width, y = (e / g.width) % g.height, plane = e / (g.height * g.width);
    const int64_t self = y * g.width + x, base = plane * g.out_h * g.out_w;
    int64_t p0, p1, q0, q1;
    sliding_outputs_containing(y, g.kernel_h, g.stride_h, g.pad_h, g.out_h, &p0, &p1);
    sliding_outputs_containing(x, g.kernel_w, g.stride_w, g.pad_w, g.out_w, &q0, &q1);
    T sum = 0;
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t q = q0; q < q1; ++q) {
        const int64_t o = base + p * g.out_w + q;
        if (indices[o] == self) sum += grad_out[o];
      }
    grad_in[e] = sum;
  }
}

template <typename T>
__global__ void avg_forward_kernel(int64_t n, const T* in, T* out, PoolGeometry g) {
  MINIDET_KERNEL_LOOP(e, n) {
    const int64_t q = e % g.out_w, p = (e / g.out_w) % g.out_h, plane = e / (g.out_h * g.out_w);
    const T* src = in + plane * g.height * g.width;
    const AvgWindow w = avg_window(g, p, q);
    T sum = 0;
    for (int64_t y = w.h0; y < w.h1; ++y)
      for (int64_t x = w.w0; x < w.w1; ++x) sum += src[y * g.width + x];
    out[e] = sum / static_cast<T>(w.divisor);
  }
}

template <typename T>
__global__ void avg_backward_kernel(int64_t n, const T* grad_out, T* grad_in, PoolGeometry g) {
  MINIDET_KERNEL_LOOP(e, n) {
    const int64_t x = e % g.width, y = (e / g.width) % g.height, plane = e / (g.height * g.width);
    const int64_t base = plane * g.out_h * g.out_w;
    int64_t p0, p1, q0, q1;
    avg_outputs_containing(g, y, x, &p0, &p1, &q0, &q1);
    T sum = 0;
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t q = q0; q < q1; ++q)
        sum += grad_out[base + p * g.out_w + q] / static_cast<T>(avg_window(g, p, q).divisor);
    grad_in[e] = sum;
  }
}

#define MINIDET_POOL_LAUNCH(kernel, n, ...)                                                              \
  kernel<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(n, __VA_ARGS__); \
  MINIDET_CUDA_LAUNCH_CHECK(#kernel)

}  // namespace

void max_pool2d_forward_cuda(const Tensor& input, const Tensor& output, const Tensor& indices,
                             const PoolGeometry& g) {
  cuda::DeviceGuard guard(input.device());
  const int64_t n = output.numel();
  MINIDET_DISPATCH_FLOATING(input.dtype(), "max_pool2d", [&] {
    MINIDET_POOL_LAUNCH(max_forward_kernel, n, input.data<scalar_t>(), output.data<scalar_t>(),
                        indices.data<int64_t>(), g);
  });
}

void max_pool2d_backward_cuda(const Tensor& grad_output, const Tensor& indices, const Tensor& grad_input,
                              const PoolGeometry& g) {
  cuda::DeviceGuard guard(grad_input.device());
  const int64_t n = grad_input.numel();
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "max_pool2d", [&] {
    MINIDET_POOL_LAUNCH(max_backward_kernel, n, grad_output.data<scalar_t>(), indices.data<int64_t>(),
                        grad_input.data<scalar_t>(), g);
  });
}

void avg_pool2d_forward_cuda(const Tensor& input, const Tensor& output, const PoolGeometry& g) {
  cuda::DeviceGuard guard(input.device());
  const int64_t n = output.numel();
  MINIDET_DISPATCH_FLOATING(input.dtype(), "avg_pool2d", [&] {
    MINIDET_POOL_LAUNCH(avg_forward_kernel, n, input.data<scalar_t>(), output.data<scalar_t>(), g);
  });
}

void avg_pool2d_backward_cuda(const Tensor& grad_output, const Tensor& grad_input, const PoolGeometry& g) {
  cuda::DeviceGuard guard(grad_input.device());
  const int64_t n = grad_input.numel();
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "avg_pool2d", [&] {
    MINIDET_POOL_LAUNCH(avg_backward_kernel, n, grad_output.data<scalar_t>(), grad_input.data<scalar_t>(), g);
  });
}

}  // namespace minidet::ops::detail
