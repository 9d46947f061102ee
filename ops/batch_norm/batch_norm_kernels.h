// The three batch-norm kernels, on (N, C, H*W) contiguous tensors with per-channel (C) vectors.
//
//   channel_moments:     sum_u[c] = sum u,   sum_uv[c] = sum (u - u_center[c]) * (v - v_center[c])
//                        (forward: u = v = x gives sum(x), then sum((x - mean)^2); backward: u = dy, v = x
//                        gives sum(dy) and sum(dy * (x - mean))); a center that is undefined counts as 0.
//   channel_affine:      y = x * scale[c] + shift[c]               (shift undefined: 0)
//   batch_norm_backward: dx = k[c] * (dy - mean_dy[c] - (x - mean[c]) * invstd[c] * mean_dy_xhat[c])
//                        with k = gamma * invstd, mean_dy = sum(dy) / M, mean_dy_xhat = sum(dy * xhat) / M.
#pragma once

#include "core/tensor.h"

namespace minidet::ops::detail {

struct BatchNormSums {
  Tensor sum_u, sum_uv;
};

BatchNormSums channel_moments(const Tensor& u, const Tensor& v, const Tensor& u_center, const Tensor& v_center);
Tensor channel_affine(const Tensor& x, const Tensor& scale, const Tensor& shift);
Tensor batch_norm_backward_input(const Tensor& grad_output, const Tensor& x, const Tensor& mean,
                                 const Tensor& invstd, const Tensor& k, const Tensor& mean_dy,
                                 const Tensor& mean_dy_xhat);

// Raw pointers and sizes of one call, shared by the CPU and CUDA kernels. plane = H * W.
template <typename T>
struct MomentsArgs {
  int64_t batch, channels, plane;
  const T *u, *v, *u_center, *v_center;  // centers may be null (0)
  T *sum_u, *sum_uv;
};

template <typename T>
struct AffineArgs {
  int64_t batch, channels, plane;
  const T *x, *scale, *shift;  // shift may be null (0)
  T* y;
};

template <typename T>
struct BackwardArgs {
  int64_t batch, channels, plane;
  const T *grad_output, *x, *mean, *invstd, *k, *mean_dy, *mean_dy_xhat;
  T* grad_input;
};

// Instantiated for float and double in batch_norm_cpu.cpp / batch_norm_cuda.cu.
template <typename T> void channel_moments_cpu(const MomentsArgs<T>& a);
template <typename T> void channel_affine_cpu(const AffineArgs<T>& a);
template <typename T> void batch_norm_backward_cpu(const BackwardArgs<T>& a);
#if MINIDET_WITH_CUDA
template <typename T> void channel_moments_cuda(const MomentsArgs<T>& a, const Device& device);
template <typename T> void channel_affine_cuda(const AffineArgs<T>& a, const Device& device);
template <typename T> void batch_norm_backward_cuda(const BackwardArgs<T>& a, const Device& device);
#endif

}  // namespace minidet::ops::detail
