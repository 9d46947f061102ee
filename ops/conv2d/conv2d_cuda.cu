// CUDA im2col / col2im.
//
// im2col: one thread per column entry, a pure gather.
// col2im: one thread per INPUT pixel. The naive adjoint of im2col (one thread per column entry adding into
// its pixel) would need atomicAdd, since windows overlap, and atomics add in a different order every run.
// Instead each pixel thread asks, for every kernel tap (i, j), which output position (p, q) read it with
// that tap: p*stride_h - pad_h + i*dilation_h = y has at most one solution, p = (y + pad_h - i*dilation_h)
// / stride_h when that division is exact and 0 <= p < H_out (same for q). It sums those entries in tap
// order and writes its pixel once: no atomics, no races, identical bits every run.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "ops/conv2d/conv2d_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
__global__ void im2col_kernel_cuda(int64_t n, const T* images, T* cols, ConvGeometry g) {
  const int64_t out_hw = g.out_h * g.out_w, taps = g.kernel_h * g.kernel_w;
  MINIDET_KERNEL_LOOP(e, n) {
    const int64_t q = e % g.out_w;
    const int64_t p = (e / g.out_w) % g.out_h;
    const int64_t row = e / out_hw;  // b*C*taps + c*taps + tap
    const int64_t plane = row / taps, tap = row % taps;
    const int64_t i = tap / g.kernel_w, j = tap % g.kernel_w;
    const int64_t y = p * g.stride_h - g.pad_h + i * g.dilation_h;
    const int64_t x = q * g.stride_w - g.pad_w + j * g.dilation_w;
    cols[e] = (y >= 0 && y < g.height && x >= 0 && x < g.width) ? images[(plane * g.height + y) * g.width + x]
                                                                 : T(0);
  }
}

template <typename T>
__global__ void col2im_kernel_cuda(int64_t n, const T* cols, T* images, ConvGeometry g) {
  const int64_t out_hw = g.out_h * g.out_w, taps = g.kernel_h * g.kernel_w;
  MINIDET_KERNEL_LOOP(e, n) {
    const int64_t x = e % g.width;
    const int64_t y = (e / g.width) % g.height;
    const int64_t plane = e / (g.height * g.width);
    const T* plane_cols = cols + plane * taps * out_hw;
    T sum = 0;
    for (int64_t i = 0; i < g.kernel_h; ++i) {
      const int64_t p_scaled = y + g.pad_h - i * g.dilation_h;  // = p * stride_h when tap i of row p hits y
      if (p_scaled < 0 || p_scaled % g.stride_h != 0) continue;
      const int64_t p = p_scaled / g.stride_h;
      if (p >= g.out_h) continue;
      for (int64_t j = 0; j < g.kernel_w; ++j) {
        const int64_t q_scaled = x + g.pad_w - j * g.dilation_w;
        if (q_scaled < 0 || q_scaled % g.stride_w != 0) continue;
        const int64_t q = q_scaled / g.stride_w;
        if (q >= g.out_w) continue;
        sum += plane_cols[(i * g.kernel_w + j) * out_hw + p * g.out_w + q];
      }
    }
    images[e] = sum;
  }
}

}  // namespace

void im2col_cuda(const Tensor& images, const Tensor& cols, const ConvGeometry& g) {
  cuda::DeviceGuard guard(images.device());
  const int64_t n = cols.numel();
  if (n == 0) return;
  MINIDET_DISPATCH_FLOATING(images.dtype(), "conv2d", [&] {
    im2col_kernel_cuda<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, images.data<scalar_t>(), cols.data<scalar_t>(), g);
    MINIDET_CUDA_LAUNCH_CHECK("im2col_kernel_cuda");
  });
}

void col2im_cuda(const Tensor& cols, const Tensor& images, const ConvGeometry& g) {
  cuda::DeviceGuard guard(images.device());
  const int64_t n = images.numel();
  if (n == 0) return;
  MINIDET_DISPATCH_FLOATING(images.dtype(), "conv2d", [&] {
    col2im_kernel_cuda<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, cols.data<scalar_t>(), images.data<scalar_t>(), g);
    MINIDET_CUDA_LAUNCH_CHECK("col2im_kernel_cuda");
  });
}

}  // namespace minidet::ops::detail
