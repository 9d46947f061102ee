// CUDA batch-norm kernels.
//
// channel_moments: a (channel, split) grid. One block per channel alone would leave most of the GPU idle
// (32 channels on 132 SMs, each block reading 16 x 64 x 64 values), so each channel's images are dealt to
// `splits` blocks: block (c, s) takes images s, s + splits, ...; its threads walk each image's plane with a
// stride of blockDim (coalesced, no division per element) and sum in float64; the block adds its threads'
// sums with a fixed tree in shared memory and writes one partial pair. A second kernel adds each channel's
// partials in split order. No atomics: the same input gives the same bits every run.
// The elementwise kernels: one thread per element. The per-channel algebra: one thread per channel, running
// the same function as the CPU (batch_norm_kernels.h).
#include <algorithm>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "core/factories.h"
#include "ops/batch_norm/batch_norm_kernels.h"

namespace minidet::ops::detail {
namespace {

constexpr int kReduceThreads = 256;  // a power of two, for the tree

constexpr int kTargetBlocks = 512;    // enough blocks to fill an H100 (132 SMs) a few times over

// Block (c, s) for c = blockIdx.x (grid-stride), s = blockIdx.y: partial[c * splits + s] and
// partial[(channels + c) * splits + s] receive the sums of u and of (u - u_c)(v - v_c) over its images.
template <typename T>
__global__ void channel_moments_partial_kernel(MomentsArgs<T> a, double* partial) {
  __shared__ double partial_u[kReduceThreads];
  __shared__ double partial_uv[kReduceThreads];
  const int64_t splits = gridDim.y, split = blockIdx.y;
  for (int64_t c = blockIdx.x; c < a.channels; c += gridDim.x) {
    const double u_center = a.u_center ? a.u_center[c] : 0.0, v_center = a.v_center ? a.v_center[c] : 0.0;
    double sum_u = 0.0, sum_uv = 0.0;
    for (int64_t n = split; n < a.batch; n += splits) {
      const T* u_plane = a.u + (n * a.channels + c) * a.plane;
      const T* v_plane = a.v + (n * a.channels + c) * a.plane;
      for (int64_t p = threadIdx.x; p < a.plane; p += blockDim.x) {
        const double u = u_plane[p];
        sum_u += u;
        sum_uv += (u - u_center) * (static_cast<double>(v_plane[p]) - v_center);
      }
    }
    partial_u[threadIdx.x] = sum_u;
    partial_uv[threadIdx.x] = sum_uv;
    __syncthreads();
    for (int half = kReduceThreads / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) {
        partial_u[threadIdx.x] += partial_u[threadIdx.x + half];
        partial_uv[threadIdx.x] += partial_uv[threadIdx.x + half];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      partial[c * splits + split] = partial_u[0];
      partial[(a.channels + c) * splits + split] = partial_uv[0];
    }
    __syncthreads();  // the shared arrays are reused for the next channel
  }
}

// One thread per channel adds its `splits` partials in order.
template <typename T>
__global__ void channel_moments_finish_kernel(MomentsArgs<T> a, const double* partial, int64_t splits) {
  MINIDET_KERNEL_LOOP(c, a.channels) {
    double sum_u = 0.0, sum_uv = 0.0;
    for (int64_t s = 0; s < splits; ++s) {
      sum_u += partial[c * splits + s];
      sum_uv += partial[(a.channels + c) * splits + s];
    }
    a.sum_u[c] = static_cast<T>(sum_u * a.scale);
    a.sum_uv[c] = static_cast<T>(sum_uv * a.scale);
  }
}

template <typename T>
__global__ void channel_affine_kernel(int64_t n, AffineArgs<T> a) {
  MINIDET_KERNEL_LOOP(i, n) {
    const int64_t c = (i / a.plane) % a.channels;
    a.y[i] = a.x[i] * a.scale[c] + (a.shift ? a.shift[c] : T(0));
  }
}

template <typename T>
__global__ void batch_norm_backward_kernel(int64_t n, BackwardArgs<T> a) {
  MINIDET_KERNEL_LOOP(i, n) {
    const int64_t c = (i / a.plane) % a.channels;
    const T xhat = (a.x[i] - a.mean[c]) * a.invstd[c];
    a.grad_input[i] = a.k[c] * (a.grad_output[i] - a.mean_dy[c] - xhat * a.mean_dy_xhat[c]);
  }
}

template <typename T>
__global__ void channel_scale_shift_kernel(ScaleShiftArgs<T> a) {
  MINIDET_KERNEL_LOOP(c, a.channels) scale_shift_channel(a, c);
}

template <typename T>
__global__ void backward_coefficients_kernel(BackwardCoefficientsArgs<T> a) {
  MINIDET_KERNEL_LOOP(c, a.channels) backward_coefficients_channel(a, c);
}

}  // namespace

template <typename T>
void channel_scale_shift_cuda(const ScaleShiftArgs<T>& a, const Device& device) {
  cuda::DeviceGuard guard(device);
  if (a.channels == 0) return;
  channel_scale_shift_kernel<T>
      <<<cuda::blocks_for(a.channels), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(a);
  MINIDET_CUDA_LAUNCH_CHECK("channel_scale_shift_kernel");
}

template <typename T>
void backward_coefficients_cuda(const BackwardCoefficientsArgs<T>& a, const Device& device) {
  cuda::DeviceGuard guard(device);
  if (a.channels == 0) return;
  backward_coefficients_kernel<T>
      <<<cuda::blocks_for(a.channels), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(a);
  MINIDET_CUDA_LAUNCH_CHECK("backward_coefficients_kernel");
}

template <typename T>
void channel_moments_cuda(const MomentsArgs<T>& a, const Device& device) {
  cuda::DeviceGuard guard(device);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(a.channels, cuda::kMaxBlocks));
  if (blocks == 0) return;
  // Split each channel's images over enough blocks to fill the GPU (at most one image per block).
  const int64_t splits = std::max<int64_t>(1, std::min<int64_t>(a.batch, kTargetBlocks / blocks));
  const Tensor partial = empty({2 * a.channels * splits}, TensorOptions(kFloat64, device));
  double* partial_data = partial.data<double>();
  const dim3 grid(blocks, static_cast<unsigned>(splits));
  channel_moments_partial_kernel<T><<<grid, kReduceThreads, 0, cuda::current_stream()>>>(a, partial_data);
  MINIDET_CUDA_LAUNCH_CHECK("channel_moments_partial_kernel");
  channel_moments_finish_kernel<T><<<cuda::blocks_for(a.channels), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(
      a, partial_data, splits);
  MINIDET_CUDA_LAUNCH_CHECK("channel_moments_finish_kernel");
}

template <typename T>
void channel_affine_cuda(const AffineArgs<T>& a, const Device& device) {
  cuda::DeviceGuard guard(device);
  const int64_t n = a.batch * a.channels * a.plane;
  if (n == 0) return;
  channel_affine_kernel<T><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(n, a);
  MINIDET_CUDA_LAUNCH_CHECK("channel_affine_kernel");
}

template <typename T>
void batch_norm_backward_cuda(const BackwardArgs<T>& a, const Device& device) {
  cuda::DeviceGuard guard(device);
  const int64_t n = a.batch * a.channels * a.plane;
  if (n == 0) return;
  batch_norm_backward_kernel<T><<<cuda::blocks_for(n), cuda::kThreadsPerBlock, 0, cuda::current_stream()>>>(n, a);
  MINIDET_CUDA_LAUNCH_CHECK("batch_norm_backward_kernel");
}

template void channel_moments_cuda<float>(const MomentsArgs<float>&, const Device&);
template void channel_moments_cuda<double>(const MomentsArgs<double>&, const Device&);
template void channel_affine_cuda<float>(const AffineArgs<float>&, const Device&);
template void channel_affine_cuda<double>(const AffineArgs<double>&, const Device&);
template void batch_norm_backward_cuda<float>(const BackwardArgs<float>&, const Device&);
template void batch_norm_backward_cuda<double>(const BackwardArgs<double>&, const Device&);
template void channel_scale_shift_cuda<float>(const ScaleShiftArgs<float>&, const Device&);
template void channel_scale_shift_cuda<double>(const ScaleShiftArgs<double>&, const Device&);
template void backward_coefficients_cuda<float>(const BackwardCoefficientsArgs<float>&, const Device&);
template void backward_coefficients_cuda<double>(const BackwardCoefficientsArgs<double>&, const Device&);

}  // namespace minidet::ops::detail
