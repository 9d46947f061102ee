// CPU cross_entropy kernels: one sample (row of C logits) at a time, samples in parallel, sums in double.
#include <cmath>

#include "ops/common/parallel.h"
#include "ops/loss/cross_entropy_kernels.h"

namespace minidet::ops::detail {
namespace {

template <typename T>
void cross_entropy_forward_loop(const T* logits, const int64_t* target, const T* weight, int64_t samples,
                                int64_t classes, CrossEntropyParams params, T* loss, T* target_weight, T* lse) {
  const double eps = params.label_smoothing;
#pragma omp parallel for if (samples * classes > kParallelAbove)
  for (int64_t i = 0; i < samples; ++i) {
    const T* z = logits + i * classes;
    double m = -INFINITY;
    for (int64_t c = 0; c < classes; ++c) m = std::fmax(m, static_cast<double>(z[c]));
    double s = 0;
    for (int64_t c = 0; c < classes; ++c) s += std::exp(z[c] - m);
    const double row_lse = m + std::log(s);
    lse[i] = static_cast<T>(row_lse);
    const int64_t t = target[i];
    if (t == params.ignore_index) {
      loss[i] = T(0);
      target_weight[i] = T(0);
      continue;
    }
    const double w_t = weight ? static_cast<double>(weight[t]) : 1.0;
    double value = (1.0 - eps) * w_t * (row_lse - z[t]);  // -w_t log p_t
    if (eps > 0) {
      double smooth = 0;  // -sum_c w_c log p_c
      for (int64_t c = 0; c < classes; ++c) smooth += (weight ? weight[c] : 1.0) * (row_lse - z[c]);
      value += eps / classes * smooth;
    }
    loss[i] = static_cast<T>(value);
    target_weight[i] = static_cast<T>(w_t);
  }
}

template <typename T>
void cross_entropy_backward_loop(const T* logits, const int64_t* target, const T* weight, const T* lse,
                                 const T* grad, int64_t grad_stride, int64_t samples, int64_t classes,
                                 CrossEntropyParams params, T* grad_logits) {
  const double eps = params.label_smoothing;
  // sum_c w_c: the smoothing term's total weight (C without weights). The same for every sample.
  double weight_total = static_cast<double>(classes);
  if (weight) {
    weight_total = 0;
    for (int64_t c = 0; c < classes; ++c) weight_total += weight[c];
  }
#pragma omp parallel for if (samples * classes > kParallelAbove)
  for (int64_t i = 0; i < samples; ++i) {
    const T* z = logits + i * classes;
    T* dz = grad_logits + i * classes;
    const int64_t t = target[i];
    if (t == params.ignore_index) {
      for (int64_t c = 0; c < classes; ++c) dz[c] = T(0);
      continue;
    }
    const double g = grad[i * grad_stride];
    const double w_t = weight ? static_cast<double>(weight[t]) : 1.0;
    const double smooth = eps > 0 ? eps / classes : 0.0;  // guards eps / C when C could be 0
    const double p_coefficient = (1.0 - eps) * w_t + smooth * weight_total;
    for (int64_t c = 0; c < classes; ++c) {
      const double p = std::exp(z[c] - static_cast<double>(lse[i]));
      double d = p * p_coefficient - smooth * (weight ? weight[c] : 1.0);
      if (c == t) d -= (1.0 - eps) * w_t;
      dz[c] = static_cast<T>(g * d);
    }
  }
}

}  // namespace

void cross_entropy_forward_cpu(const Tensor& logits, const Tensor& target, const Tensor& weight,
                               const CrossEntropyParams& params, const Tensor& loss, const Tensor& target_weight,
                               const Tensor& lse) {
  MINIDET_DISPATCH_FLOATING(logits.dtype(), "cross_entropy", [&] {
    cross_entropy_forward_loop<scalar_t>(logits.data<scalar_t>(), target.data<int64_t>(),
                                         weight.defined() ? weight.data<scalar_t>() : nullptr, logits.size(0),
                                         logits.size(1), params, loss.data<scalar_t>(),
                                         target_weight.data<scalar_t>(), lse.data<scalar_t>());
  });
}

void cross_entropy_backward_cpu(const Tensor& logits, const Tensor& target, const Tensor& weight,
                                const Tensor& lse, const Tensor& grad, int64_t grad_stride,
                                const CrossEntropyParams& params, const Tensor& grad_logits) {
  MINIDET_DISPATCH_FLOATING(logits.dtype(), "cross_entropy backward", [&] {
    cross_entropy_backward_loop<scalar_t>(logits.data<scalar_t>(), target.data<int64_t>(),
                                          weight.defined() ? weight.data<scalar_t>() : nullptr,
                                          lse.data<scalar_t>(), grad.data<scalar_t>(), grad_stride, logits.size(0),
                                          logits.size(1), params, grad_logits.data<scalar_t>());
  });
}

}  // namespace minidet::ops::detail
