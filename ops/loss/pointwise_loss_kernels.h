// The per-element math of the pointwise losses (formulas in pointwise_loss.h), written once for the CPU
// loops and the CUDA kernels, and their launchers. Operands are expanded to one shape (weight and
// pos_weight may have stride 0); outputs are contiguous. The `*_kernel` functions choose CPU or CUDA by device
// (in pointwise_loss.cpp).
#pragma once

#include <cmath>

#include "core/macros.h"
#include "core/tensor.h"

namespace minidet::ops::detail {

enum class PointwiseLoss { BceWithLogits, SmoothL1, L1 };

template <typename T>
MINIDET_HOST_DEVICE inline T softplus_of_negative(T x) {  // log(1 + e^-x), stable for any x
  using std::exp;
  using std::log1p;
  return static_cast<T>(log1p(exp(-(x < T(0) ? -x : x)))) + (x < T(0) ? -x : T(0));
}

template <typename T>
MINIDET_HOST_DEVICE inline T stable_sigmoid(T x) {
  using std::exp;
  if (x >= T(0)) return T(1) / (T(1) + static_cast<T>(exp(-x)));
  const T e = static_cast<T>(exp(x));
  return e / (T(1) + e);
}

// The loss of one element, before the weight. pos_weight is only read by BceWithLogits.
template <typename T>
MINIDET_HOST_DEVICE inline T pointwise_loss_value(PointwiseLoss kind, T x, T t, T pos_weight, T beta) {
  using std::exp;
  using std::log1p;
  switch (kind) {
    case PointwiseLoss::BceWithLogits: {
      const T abs_x = x < T(0) ? -x : x;
      const T base = (x > T(0) ? x : T(0)) - x * t + static_cast<T>(log1p(exp(-abs_x)));
      return base + (pos_weight - T(1)) * t * softplus_of_negative(x);
    }
    case PointwiseLoss::SmoothL1: {
      const T d = x - t, abs_d = d < T(0) ? -d : d;
      return abs_d < beta ? T(0.5) * d * d / beta : abs_d - T(0.5) * beta;
    }
    case PointwiseLoss::L1: {
      const T d = x - t;
      return d < T(0) ? -d : d;
    }
  }
  return T(0);
}

// d(loss)/d(input) and d(loss)/d(target) of one element, before the weight and the upstream gradient.
template <typename T>
MINIDET_HOST_DEVICE inline void pointwise_loss_grads(PointwiseLoss kind, T x, T t, T pos_weight, T beta, T* d_input,
                                                     T* d_target) {
  switch (kind) {
    case PointwiseLoss::BceWithLogits: {
      const T s = stable_sigmoid(x);
      *d_input = s - t + (pos_weight - T(1)) * t * (s - T(1));
      *d_target = -x + (pos_weight - T(1)) * softplus_of_negative(x);
      return;
    }
    case PointwiseLoss::SmoothL1:
    case PointwiseLoss::L1: {
      const T d = x - t, abs_d = d < T(0) ? -d : d;
      const T sign = static_cast<T>((d > T(0)) - (d < T(0)));
      // L1 never takes the quadratic branch: abs_d < beta is false for its beta of 0.
      *d_input = (kind == PointwiseLoss::SmoothL1 && abs_d < beta) ? d / beta : sign;
      *d_target = -*d_input;
      return;
    }
  }
}

// loss = weight * value(input, target, pos_weight), elementwise over loss's shape.
void pointwise_loss_forward_kernel(PointwiseLoss kind, double beta, const Tensor& loss, const Tensor& input,
                                   const Tensor& target, const Tensor& weight, const Tensor& pos_weight);
// grad_input = grad * weight * dvalue/dinput; the same for grad_target, which may be undefined (not needed).
void pointwise_loss_backward_kernel(PointwiseLoss kind, double beta, const Tensor& grad_input,
                                    const Tensor& grad_target, const Tensor& grad, const Tensor& input,
                                    const Tensor& target, const Tensor& weight, const Tensor& pos_weight);

void pointwise_loss_forward_cpu(PointwiseLoss kind, double beta, const Tensor& loss, const Tensor& input,
                                const Tensor& target, const Tensor& weight, const Tensor& pos_weight);
void pointwise_loss_backward_cpu(PointwiseLoss kind, double beta, const Tensor& grad_input,
                                 const Tensor& grad_target, const Tensor& grad, const Tensor& input,
                                 const Tensor& target, const Tensor& weight, const Tensor& pos_weight);
#if MINIDET_WITH_CUDA
void pointwise_loss_forward_cuda(PointwiseLoss kind, double beta, const Tensor& loss, const Tensor& input,
                                 const Tensor& target, const Tensor& weight, const Tensor& pos_weight);
void pointwise_loss_backward_cuda(PointwiseLoss kind, double beta, const Tensor& grad_input,
                                  const Tensor& grad_target, const Tensor& grad, const Tensor& input,
                                  const Tensor& target, const Tensor& weight, const Tensor& pos_weight);
#endif

}  // namespace minidet::ops::detail
