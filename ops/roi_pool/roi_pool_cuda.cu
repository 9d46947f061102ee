// CUDA RoIPool kernels, same bins and tie rule as the CPU (roi_pool_kernels.h).
//   forward:               one thread per output element (k, c, p, q) scans its bin, in 32-bit index
//                          arithmetic when the tensors allow. Two other layouts were slower: a channel-last
//                          forward, one warp per bin as RoIAlign's (a max over a bin reads each pixel once
//                          per bin, and this order's neighbouring bins share cache lines), and one warp per
//                          RoI row of bins reading whole rows of the plane, coalesced, into column maxima
//                          (the per-warp set-up and the merge of each bin's columns cost more than the
//                          scattered reads they save).
//   backward (default):    one thread per output element atomically adds dy at its argmax in dx (NCHW,
//                          zeroed first). Consecutive threads are neighbouring bins of one plane, so their
//                          reads are coalesced and their atomics land near each other.
//   backward (determin.):  roi_pool_deterministic_cuda.cu.
#include <algorithm>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "ops/roi_align/roi_align_nhwc.cuh"  // with_index
#include "ops/roi_pool/roi_pool_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T, typename Index>
__global__ void forward_kernel(Index n, const T* input, const T* rois, T* output, int64_t* argmax,
                               RoIPoolGeometry g) {
  const Index pooled_w = Index(g.pooled_width), pooled_h = Index(g.pooled_height), channels = Index(g.channels);
  const Index plane_size = Index(g.height * g.width);
  for (Index e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += Index(blockDim.x) * gridDim.x) {
    const Index q = e % pooled_w, bin_row = e / pooled_w, p = bin_row % pooled_h, plane = bin_row / pooled_h;
    const Index c = plane % channels, k = plane / channels;
    const T* roi = rois + k * 5;
    const Index batch = static_cast<Index>(roi[0]);
    roi_pool_bin_max(input + (batch * channels + c) * plane_size, Index(g.width), roi_pool_bin(roi, g, p, q),
                     &output[e], &argmax[e]);
  }
}

template <typename T, typename Index>
__global__ void backward_atomic_kernel(Index n, const T* grad_output, const T* rois, const int64_t* argmax,
                                       T* grad_input, RoIPoolGeometry g) {
  const Index bins = Index(g.pooled_height * g.pooled_width), channels = Index(g.channels);
  for (Index e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += Index(blockDim.x) * gridDim.x) {
    const int64_t source = argmax[e];
    if (source < 0) continue;  // empty bin: nothing to route
    const Index plane = e / bins, c = plane % channels, k = plane / channels;
    const int64_t batch = static_cast<int64_t>(rois[int64_t(k) * 5]);
    atomicAdd(&grad_input[(batch * g.channels + c) * g.height * g.width + source], grad_output[e]);
  }
}

}  // namespace

void roi_pool_forward_cuda(const Tensor& input, const Tensor& rois, const Tensor& output, const Tensor& argmax,
                           const RoIPoolGeometry& g) {
  cuda::DeviceGuard guard(input.device());
  const int64_t n = output.numel();
  if (n == 0) return;
  MINIDET_DISPATCH_FLOATING(input.dtype(), "roi_pool", [&] {
    // 32-bit index arithmetic when both the outputs and the input's offsets fit (n >= K * 5 as PH, PW, C >= 1).
    roi_nhwc::with_index(std::max(n, input.numel()), [&](auto index) {
      using Index = decltype(index);
      forward_kernel<scalar_t, Index><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
          Index(n), input.data<scalar_t>(), rois.data<scalar_t>(), output.data<scalar_t>(), argmax.data<int64_t>(), g);
    });
    MINIDET_CUDA_LAUNCH_CHECK("roi_pool forward_kernel");
  });
}

void roi_pool_backward_cuda(const Tensor& grad_output, const Tensor& rois, const Tensor& argmax,
                            const Tensor& grad_input, const RoIPoolGeometry& g, bool deterministic) {
  if (deterministic) return roi_pool_backward_deterministic_cuda(grad_output, rois, argmax, grad_input, g);
  cuda::DeviceGuard guard(grad_input.device());
  MINIDET_DISPATCH_FLOATING(grad_input.dtype(), "roi_pool", [&] {
    using T = scalar_t;
    grad_input.zero_();
    const int64_t n = grad_output.numel();
    roi_nhwc::with_index(n, [&](auto index) {
      using Index = decltype(index);
      backward_atomic_kernel<T, Index><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
          Index(n), grad_output.data<T>(), rois.data<T>(), argmax.data<int64_t>(), grad_input.data<T>(), g);
    });
    MINIDET_CUDA_LAUNCH_CHECK("roi_pool backward_atomic_kernel");
  });
}

}  // namespace minidet::ops::detail
