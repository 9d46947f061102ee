// Fused parameter updates: each reads a parameter, its gradient and its state once and writes them once.
// CPU loops and CUDA kernels implement the same per-element formulas (see sgd.h and adam.h).
#pragma once

#include <vector>

#include "core/tensor.h"

namespace minidet::nn::detail {

struct SgdStep {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  bool first_step;  // the momentum buffer starts as the first gradient, not as zeros
};

struct AdamStep {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled_weight_decay;  // AdamW
  double bias_correction1, bias_correction2;  // 1 - beta^t
};

struct AdamTensors {
  Tensor param, grad, exp_avg, exp_avg_sq;
};

// momentum_buffer may be undefined when momentum == 0.
void sgd_update(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& s);

// One Adam step for many parameters (a multi-tensor apply): on the GPU one launch per kAdamTensorsPerLaunch
// parameters, rather than one launch per parameter tensor of the model. The parameters
// may lie on different devices or have different dtypes; each run of one device and dtype is launched
// together. Each element's arithmetic is adam_element (optim_math.h), on the CPU as on the GPU.
void adam_update_many(const std::vector<AdamTensors>& tensors, const AdamStep& s);

void sgd_update_cpu(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& s);
void adam_update_cpu(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                     const AdamStep& s);
#if MINIDET_WITH_CUDA
void sgd_update_cuda(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer, const SgdStep& s);
constexpr int kAdamTensorsPerLaunch = 48;  // their pointers travel as kernel parameters (at most 4 KB)
// tensors: at most kAdamTensorsPerLaunch, all on one GPU, of one dtype, checked by adam_update_many.
void adam_update_many_cuda(const std::vector<AdamTensors>& tensors, const AdamStep& s);
#endif

}  // namespace minidet::nn::detail
