// CUDA RoIPool kernels, same bins and tie rule as the CPU (roi_pool_kernels.h).
//   forward:               one thread per output element (k, c, p, q) scans its bin.
//   backward (default):    one thread per output element atomically adds dy at its argmax.
//   backward (determin.):  one thread per input pixel (b, h, w) GATHERS: it walks the RoIs in order k, skips
//                          those of other images or whose bins miss the pixel, and for each bin containing
//                          it adds dy of every channel whose argmax is this pixel. The thread owns dx[b, :, h, w]
//                          alone, so no atomics, and it adds in the CPU's order (k, p, q).
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "ops/roi_pool/roi_pool_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
__global__ void forward_kernel(int64_t n, const T* input, const T* rois, T* output, int64_t* argmax,
                               RoIPoolGeometry g) {
  MINIDET_KERNEL_LOOP(e, n) {
    const int64_t q = e % g.pooled_width, p = (e / g.pooled_width) % g.pooled_height;
    const int64_t c = (e / (g.pooled_width * g.pooled_height)) % g.channels;
    const int64_t k = e / (g.pooled_width * g.pooled_height * g.channels);
    const T* roi = rois + k * 5;
    const int64_t batch = static_cast<int64_t>(roi[0]);
    const T* plane = input + (batch * g.channels + c) * g.height * g.width;
    roi_pool_bin_max(plane, g.width, roi_pool_bin(roi, g, p, q), &output[e], &argmax[e]);
  }
}

template <typename T>
__global__ void backward_atomic_kernel(int64_t n, const T* grad_output, const T* rois, const int64_t* argmax,
                                       T* grad_input, RoIPoolGeometry g) {
  MINIDET_KERNEL_LOOP(e, n) {
    const int64_t source = argmax[e];
    if (source < 0) continue;  // empty bin: nothing to route
    const int64_t c = (e / (g.pooled_width * g.pooled_height)) % g.channels;
    const int64_t k = e / (g.pooled_width * g.pooled_height * g.channels);
    const int64_t batch = static_cast<int64_t>(rois[k * 5]);
    atomicAdd(&grad_input[(batch * g.channels + c) * g.height * g.width + source], grad_output[e]);
  }
}

template <typename T>
__global__ void backward_gather_kernel(int64_t n, const T* grad_output, const T* rois, const int64_t* argmax,
                                       T* grad_input, RoIPoolGeometry g) {
  MINIDET_KERNEL_LOOP(e, n) {
    const int64_t x = e % g.width, y = (e / g.width) % g.height, batch = e / (g.width * g.height);
    const int64_t self = y * g.width + x, plane_size = g.height * g.width;
    const int64_t bins = g.pooled_height * g.pooled_width;
    for (int64_t k = 0; k < g.num_rois; ++k) {
      const T* roi = rois + k * 5;
      if (static_cast<int64_t>(roi[0]) != batch) continue;
      // Bin edges grow with p and q, so the first and last bins bound the pixels the RoI can touch.
      const RoIPoolBin first = roi_pool_bin(roi, g, 0, 0);
      const RoIPoolBin last = roi_pool_bin(roi, g, g.pooled_height - 1, g.pooled_width - 1);
      if (y < first.y0 || y >= last.y1 || x < first.x0 || x >= last.x1) continue;
      for (int64_t p = 0; p < g.pooled_height; ++p) {
        const RoIPoolBin row = roi_pool_bin(roi, g, p, 0);
        if (y < row.y0 || y >= row.y1) continue;
        for (int64_t q = 0; q < g.pooled_width; ++q) {
          const RoIPoolBin bin = roi_pool_bin(roi, g, p, q);
          if (x < bin.x0 || x >= bin.x1) continue;
          for (int64_t c = 0; c < g.channels; ++c) {
            const int64_t o = (k * g.channels + c) * bins + p * g.pooled_width + q;
            if (argmax[o] == self) grad_input[(batch * g.channels + c) * plane_size + self] += grad_output[o];
          }
        }
      }
    }
  }
}

}  // namespace

void roi_pool_forward_cuda(const Tensor& input, const Tensor& rois, const Tensor& output, const Tensor& argmax,
                           const RoIPoolGeometry& g) {
  cuda::DeviceGuard guard(input.device());
  const int64_t n = output.numel();
  MINIDET_DISPATCH_FLOATING(input.dtype(), "roi_pool", [&] {
    forward_kernel<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
        n, input.data<scalar_t>(), rois.data<scalar_t>(), output.data<scalar_t>(), argmax.data<int64_t>(), g);
    MINIDET_CUDA_LAUNCH_CHECK("roi_pool forward_kernel");
  });
}

void roi_pool_backward_cuda(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                            const Tensor& grad_input, const RoIPoolGeometry& g, bool deterministic) {
  cuda::DeviceGuard guard(grad_input.device());
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "roi_pool", [&] {
    if (deterministic) {
      const int64_t n = grad_input.size(0) * g.height * g.width;  // one thread per (b, h, w), all channels
      backward_gather_kernel<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
          n, grad_output.data<scalar_t>(), rois.data<scalar_t>(), argmax.data<int64_t>(),
          grad_input.data<scalar_t>(), g);
      MINIDET_CUDA_LAUNCH_CHECK("roi_pool backward_gather_kernel");
    } else {
      const int64_t n = grad_output.numel();
      backward_atomic_kernel<scalar_t><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
          n, grad_output.data<scalar_t>(), rois.data<scalar_t>(), argmax.data<int64_t>(),
          grad_input.data<scalar_t>(), g);
      MINIDET_CUDA_LAUNCH_CHECK("roi_pool backward_atomic_kernel");
    }
  });
}

}  // namespace minidet::ops::detail
