// CUDA cross_entropy kernels: one warp per sample (ops/softmax/warp_rows.cuh), the same math as
// cross_entropy_cpu.cpp, accumulating in the tensor's own type.
#include "core/cuda/check.h"
#include "core/cuda/context.h"
#include "ops/loss/cross_entropy_kernels.h"
#include "ops/softmax/warp_rows.cuh"

namespace minidet::ops::detail {
namespace {

template <typename T>
__global__ void cross_entropy_forward_kernel_cuda(const T* logits, const int64_t* target, const T* weight,
                                                  int64_t samples, int64_t classes, CrossEntropyParams params,
                                                  T* loss, T* target_weight, T* lse) {
  const T eps = static_cast<T>(params.label_smoothing);
  MINIDET_WARP_ROW_LOOP(i, lane, samples) {
    const T* z = logits + i * classes;
    T m = -INFINITY;
    for (int64_t c = lane; c < classes; c += kWarpSize) m = fmax(m, z[c]);
    m = warp_max(m);
    T s = 0;
    for (int64_t c = lane; c < classes; c += kWarpSize) s += exp(z[c] - m);
    const T row_lse = m + ::log(warp_sum(s));
    const int64_t t = target[i];
    const bool ignored = t == params.ignore_index;
    T smooth = 0;  // -sum_c w_c log p_c, only needed with label smoothing
    if (!ignored && eps > T(0)) {
      for (int64_t c = lane; c < classes; c += kWarpSize) smooth += (weight ? weight[c] : T(1)) * (row_lse - z[c]);
      smooth = warp_sum(smooth);
    }
    if (lane == 0) {
      lse[i] = row_lse;
      const T w_t = ignored ? T(0) : (weight ? weight[t] : T(1));
      T value = ignored ? T(0) : (T(1) - eps) * w_t * (row_lse - z[t]);
      if (!ignored && eps > T(0)) value += eps / static_cast<T>(classes) * smooth;
      loss[i] = value;
      target_weight[i] = w_t;
    }
  }
}

template <typename T>
__global__ void cross_entropy_backward_kernel_cuda(const T* logits, const int64_t* target, const T* weight,
                                                   const T* lse, const T* grad, int64_t grad_stride, int64_t samples,
                                                   int64_t classes, CrossEntropyParams params, T* grad_logits) {
  const T eps = static_cast<T>(params.label_smoothing);
  const T smooth = eps > T(0) ? eps / static_cast<T>(classes) : T(0);
  MINIDET_WARP_ROW_LOOP(i, lane, samples) {
    const T* z = logits + i * classes;
    T* dz = grad_logits + i * classes;
    const int64_t t = target[i];
    if (t == params.ignore_index) {  // the same for the whole warp, so no shuffle is skipped by half of it
      for (int64_t c = lane; c < classes; c += kWarpSize) dz[c] = T(0);
      continue;
    }
    T weight_total = static_cast<T>(classes);  // sum_c w_c
    if (weight && eps > T(0)) {
      weight_total = 0;
      for (int64_t c = lane; c < classes; c += kWarpSize) weight_total += weight[c];
      weight_total = warp_sum(weight_total);
    }
    const T g = grad[i * grad_stride];
    const T w_t = weight ? weight[t] : T(1);
    const T p_coefficient = (T(1) - eps) * w_t + smooth * weight_total;
    for (int64_t c = lane; c < classes; c += kWarpSize) {
      const T p = exp(z[c] - lse[i]);
      T d = p * p_coefficient - smooth * (weight ? weight[c] : T(1));
      if (c == t) d -= (T(1) - eps) * w_t;
      dz[c] = g * d;
    }
  }
}

}  // namespace

void cross_entropy_forward_cuda(const Tensor& logits, const Tensor& target, const Tensor& weight,
                                const CrossEntropyParams& params, const Tensor& loss, const Tensor& target_weight,
                                const Tensor& lse) {
  cuda::DeviceGuard guard(logits.device());
  const int64_t samples = logits.size(0), classes = logits.size(1);
  MINIDET_DISPATCH_FLOATING(logits.dtype(), "cross_entropy", [&] {
    cross_entropy_forward_kernel_cuda<scalar_t>
        <<<warp_row_blocks(samples), kRowsPerBlock * kWarpSize, 0, cuda::current_stream()>>>(
            logits.data<scalar_t>(), target.data<int64_t>(), weight.defined() ? weight.data<scalar_t>() : nullptr,
            samples, classes, params, loss.data<scalar_t>(), target_weight.data<scalar_t>(), lse.data<scalar_t>());
    MINIDET_CUDA_LAUNCH_CHECK("cross_entropy_forward_kernel_cuda");
  });
}

void cross_entropy_backward_cuda(const Tensor& logits, const Tensor& target, const Tensor& weight,
                                 const Tensor& lse, const Tensor& grad, int64_t grad_stride,
                                 const CrossEntropyParams& params, const Tensor& grad_logits) {
  cuda::DeviceGuard guard(logits.device());
  const int64_t samples = logits.size(0), classes = logits.size(1);
  MINIDET_DISPATCH_FLOATING(logits.dtype(), "cross_entropy backward", [&] {
    cross_entropy_backward_kernel_cuda<scalar_t>
        <<<warp_row_blocks(samples), kRowsPerBlock * kWarpSize, 0, cuda::current_stream()>>>(
            logits.data<scalar_t>(), target.data<int64_t>(), weight.defined() ? weight.data<scalar_t>() : nullptr,
            lse.data<scalar_t>(), grad.data<scalar_t>(), grad_stride, samples, classes, params,
            grad_logits.data<scalar_t>());
    MINIDET_CUDA_LAUNCH_CHECK("cross_entropy_backward_kernel_cuda");
  });
}

}  // namespace minidet::ops::detail
