// BatchNorm2d and FrozenBatchNorm2d layers (the ops and their math: ops/batch_norm/batch_norm.h).
//
// BatchNorm2d: in training mode normalises with the batch's statistics and updates running_mean and
// running_var (momentum 0.1, unbiased variance); in eval mode uses the running statistics. weight starts at
// 1, bias at 0. FrozenBatchNorm2d holds all four as buffers: a fixed affine map, as detection backbones
// use when their batches are too small for reliable statistics.
#pragma once

#include "nn/module/module.h"

namespace minidet::nn {

class BatchNorm2d final : public UnaryModule {
 public:
  explicit BatchNorm2d(int64_t channels, double eps = 1e-5, double momentum = 0.1);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  double eps, momentum;
};

class FrozenBatchNorm2d final : public UnaryModule {
 public:
  explicit FrozenBatchNorm2d(int64_t channels, double eps = 1e-5);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  Tensor weight, bias, running_mean, running_var;
  double eps;
};

}  // namespace minidet::nn
