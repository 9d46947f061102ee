// CUDA batch-norm kernels.
//
// channel_moments: one block per channel (grid-stride over channels). Each thread sums a fixed, strided
// subset of the channel's M values in float64, then the block adds the partial sums with a fixed tree in
// shared memory. No atomics: the same input gives the same bits every run.
// The elementwise kernels: one thread per element.
#include <algorithm>

#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "core/cuda/launch.h"
#include "ops/batch_norm/batch_norm_kernels.h"

namespace minidet::ops::detail {
namespace {

constexpr int kReduceThreads = 256;  // a power of two, for the tree

template <typename T>
__global__ void channel_moments_kernel(MomentsArgs<T> a) {
  __shared__ double partial_u[kReduceThreads];
  __shared__ double partial_uv[kReduceThreads];
  const int64_t count = a.batch * a.plane;
  for (int64_t c = blockIdx.x; c < a.channels; c += gridDim.x) {
    const double u_center = a.u_center ? a.u_center[c] : 0.0, v_center = a.v_center ? a.v_center[c] : 0.0;
    double sum_u = 0.0, sum_uv = 0.0;
    for (int64_t m = threadIdx.x; m < count; m += blockDim.x) {
      const int64_t index = ((m / a.plane) * a.channels + c) * a.plane + m % a.plane;
      const double u = a.u[index];
      sum_u += u;
      sum_uv += (u - u_center) * (static_cast<double>(a.v[index]) - v_center);
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
      a.sum_u[c] = static_cast<T>(partial_u[0]);
      a.sum_uv[c] = static_cast<T>(partial_uv[0]);
    }
    __syncthreads();  // the shared arrays are reused for the next channel
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

}  // namespace

template <typename T>
void channel_moments_cuda(const MomentsArgs<T>& a, const Device& device) {
  cuda::DeviceGuard guard(device);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(a.channels, cuda::kMaxBlocks));
  if (blocks == 0) return;
  channel_moments_kernel<T><<<blocks, kReduceThreads, 0, cuda::current_stream()>>>(a);
  MINIDET_CUDA_LAUNCH_CHECK("channel_moments_kernel");
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

}  // namespace minidet::ops::detail
