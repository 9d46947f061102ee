// The per-element update formulas, shared by the CPU loops and the CUDA kernels.
#pragma once

#include <cmath>

#include "core/macros.h"
#include "nn/optim/optim_kernels.h"

namespace minidet::nn::detail {

// SGD with momentum (PyTorch's formulation):
//   d = g + wd * p
//   buf = first ? d : momentum * buf + (1 - dampening) * d
//   d = nesterov ? d + momentum * buf : buf
//   p = p - lr * d
template <typename T>
MINIDET_HOST_DEVICE inline void sgd_element(T& p, T g, T* buf, const SgdStep& s) {
  T d = g + static_cast<T>(s.weight_decay) * p;
  if (buf != nullptr) {
    *buf = s.first_step ? d : static_cast<T>(s.momentum) * *buf + static_cast<T>(1 - s.dampening) * d;
    d = s.nesterov ? d + static_cast<T>(s.momentum) * *buf : *buf;
  }
  p -= static_cast<T>(s.lr) * d;
}

// Adam / AdamW:
//   AdamW: p = p * (1 - lr * wd)            Adam: g = g + wd * p
//   m = b1 m + (1 - b1) g,   v = b2 v + (1 - b2) g^2
//   p = p - lr * (m / bc1) / (sqrt(v / bc2) + eps),   bc_i = 1 - b_i^t
template <typename T>
MINIDET_HOST_DEVICE inline void adam_element(T& p, T g, T& m, T& v, const AdamStep& s) {
  using std::sqrt;  // float stays float on the host too, as on the GPU
  if (s.decoupled_weight_decay) p *= static_cast<T>(1 - s.lr * s.weight_decay);
  else g += static_cast<T>(s.weight_decay) * p;
  m = static_cast<T>(s.beta1) * m + static_cast<T>(1 - s.beta1) * g;
  v = static_cast<T>(s.beta2) * v + static_cast<T>(1 - s.beta2) * g * g;
  const T m_hat = m / static_cast<T>(s.bias_correction1);
  const T v_hat = v / static_cast<T>(s.bias_correction2);
  p -= static_cast<T>(s.lr) * m_hat / (sqrt(v_hat) + static_cast<T>(s.eps));
}

}  // namespace minidet::nn::detail
