// The batch-norm kernels: three on (N, C, H*W) contiguous tensors with per-channel (C) vectors, and two that
// do the per-channel algebra between them in one launch each.
//
//   channel_moments:     sum_u[c] = s * sum u,   sum_uv[c] = s * sum (u - u_center[c]) * (v - v_center[c])
//                        (forward, s = 1/M: u = v = x gives mean(x), then the biased variance; backward,
//                        s = 1: u = dy, v = x gives sum(dy) and sum(dy * (x - mean))); a center that is
//                        undefined counts as 0.
//   channel_scale_shift: invstd = 1 / sqrt(var + eps), scale = gamma * invstd, shift = beta - mean * scale;
//                        in training also running_mean = (1 - momentum) * running_mean + momentum * mean and
//                        running_var = (1 - momentum) * running_var + momentum * var * M / (M - 1) (unbiased)
//   backward_coefficients: grad_gamma = sum(dy * (x - mean)) * invstd, k = gamma * invstd,
//                        mean_dy = sum(dy) / M, mean_dy_xhat = grad_gamma / M
// The per-channel algebra is a dozen tiny elementwise ops if written with tensors; fused, it is one launch
// per BatchNorm layer in forward and one in backward, however many terms it has. Its arithmetic is one
// function per channel (below), the same code on the CPU and the GPU, in float64.
//   channel_affine:      y = x * scale[c] + shift[c]               (shift undefined: 0)
//   batch_norm_backward: dx = k[c] * (dy - mean_dy[c] - (x - mean[c]) * invstd[c] * mean_dy_xhat[c])
//                        with k = gamma * invstd, mean_dy = sum(dy) / M, mean_dy_xhat = sum(dy * xhat) / M.
#pragma once

#include <cmath>

#include "core/macros.h"
#include "core/tensor.h"

namespace minidet::ops::detail {

struct BatchNormSums {
  Tensor sum_u, sum_uv;
};

BatchNormSums channel_moments(const Tensor& u, const Tensor& v, const Tensor& u_center, const Tensor& v_center,
                              double scale = 1.0);
Tensor channel_affine(const Tensor& x, const Tensor& scale, const Tensor& shift);
Tensor batch_norm_backward_input(const Tensor& grad_output, const Tensor& x, const Tensor& mean,
                                 const Tensor& invstd, const Tensor& k, const Tensor& mean_dy,
                                 const Tensor& mean_dy_xhat);

// The checks batch_norm2d and sync_batch_norm2d share: a floating (N, C, H, W) input, (C) vectors of its
// dtype and device, eps >= 0, both running statistics or neither, and them in eval mode.
void check_batch_norm_arguments(const char* op, const Tensor& input, const Tensor& running_mean,
                                const Tensor& running_var, const Tensor& weight, const Tensor& bias, bool training,
                                double eps);

// channel_scale_shift on C-vectors: normalise with `mean` and `var`; when running_mean and running_var are
// defined, they are updated in place (training), the variance times `unbias`.
struct ScaleShift {
  Tensor mean, invstd, scale, shift;  // mean: a copy of the mean given, when asked for (copy_mean)
};
ScaleShift channel_scale_shift(const Tensor& mean, const Tensor& var, const Tensor& weight, const Tensor& bias,
                               double eps, const Tensor& running_mean, const Tensor& running_var, double momentum,
                               double unbias, bool copy_mean);
// backward_coefficients on C-vectors, from the sums of channel_moments(dy, x, -, mean) over `count` values.
struct BackwardCoefficients {
  Tensor grad_weight, k, mean_dy, mean_dy_xhat;
};
BackwardCoefficients backward_coefficients(const BatchNormSums& sums, const Tensor& invstd, const Tensor& weight,
                                           int64_t count);

// Raw pointers and sizes of one call, shared by the CPU and CUDA kernels. plane = H * W.
template <typename T>
struct MomentsArgs {
  int64_t batch, channels, plane;
  const T *u, *v, *u_center, *v_center;  // centers may be null (0)
  T *sum_u, *sum_uv;
  double scale = 1.0;  // both sums are multiplied by it (1/M gives means)
};

template <typename T>
struct ScaleShiftArgs {
  int64_t channels;
  const T *mean, *var, *weight, *bias;  // weight and bias may be null (1 and 0)
  double eps, momentum, unbias;         // unbias = M / (M - 1)
  T *running_mean, *running_var;        // null: not updated (eval mode)
  T *mean_copy, *invstd, *scale, *shift;  // mean_copy may be null
};

template <typename T>
struct BackwardCoefficientsArgs {
  int64_t channels;
  double inv_count;  // 1 / M
  const T *sum_dy, *sum_dy_xmu, *invstd, *weight;  // weight may be null (1)
  T *grad_weight, *k, *mean_dy, *mean_dy_xhat;
};

template <typename T>
MINIDET_HOST_DEVICE inline void scale_shift_channel(const ScaleShiftArgs<T>& a, int64_t c) {
  const double mean = a.mean[c], var = a.var[c];
  const double invstd = 1.0 / std::sqrt(var + a.eps);
  const double scale = a.weight ? a.weight[c] * invstd : invstd;
  a.invstd[c] = static_cast<T>(invstd);
  a.scale[c] = static_cast<T>(scale);
  a.shift[c] = static_cast<T>((a.bias ? static_cast<double>(a.bias[c]) : 0.0) - mean * scale);
  if (a.mean_copy) a.mean_copy[c] = a.mean[c];
  if (a.running_mean) {
    a.running_mean[c] = static_cast<T>((1.0 - a.momentum) * a.running_mean[c] + a.momentum * mean);
    a.running_var[c] = static_cast<T>((1.0 - a.momentum) * a.running_var[c] + a.momentum * var * a.unbias);
  }
}

template <typename T>
MINIDET_HOST_DEVICE inline void backward_coefficients_channel(const BackwardCoefficientsArgs<T>& a, int64_t c) {
  const double invstd = a.invstd[c];
  const double grad_weight = a.sum_dy_xmu[c] * invstd;
  a.grad_weight[c] = static_cast<T>(grad_weight);
  a.k[c] = static_cast<T>(a.weight ? a.weight[c] * invstd : invstd);
  a.mean_dy[c] = static_cast<T>(a.sum_dy[c] * a.inv_count);
  a.mean_dy_xhat[c] = static_cast<T>(grad_weight * a.inv_count);
}

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
template <typename T> void channel_scale_shift_cpu(const ScaleShiftArgs<T>& a);
template <typename T> void backward_coefficients_cpu(const BackwardCoefficientsArgs<T>& a);
#if MINIDET_WITH_CUDA
template <typename T> void channel_moments_cuda(const MomentsArgs<T>& a, const Device& device);
template <typename T> void channel_affine_cuda(const AffineArgs<T>& a, const Device& device);
template <typename T> void batch_norm_backward_cuda(const BackwardArgs<T>& a, const Device& device);
template <typename T> void channel_scale_shift_cuda(const ScaleShiftArgs<T>& a, const Device& device);
template <typename T> void backward_coefficients_cuda(const BackwardCoefficientsArgs<T>& a, const Device& device);
#endif

}  // namespace minidet::ops::detail
