#include "nn/layers/batch_norm.h"

#include "core/factories.h"
#include "ops/batch_norm/batch_norm.h"
#include "ops/elementwise/binary.h"

namespace minidet::nn {

BatchNorm2d::BatchNorm2d(int64_t channels, double eps_, double momentum_)
    : UnaryModule("BatchNorm2d"), eps(eps_), momentum(momentum_) {
  MINIDET_CHECK(channels > 0, "BatchNorm2d: channels must be positive, got ", channels);
  weight = register_parameter("weight", ones({channels}));
  bias = register_parameter("bias", zeros({channels}));
  running_mean = register_buffer("running_mean", zeros({channels}));
  running_var = register_buffer("running_var", ones({channels}));
  num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
}

Tensor BatchNorm2d::forward(const Tensor& input) {
  if (is_training()) {
    NoGradGuard no_grad;
    num_batches_tracked.copy_(num_batches_tracked + 1.0);
  }
  return batch_norm2d(input, running_mean, running_var, weight, bias, is_training(), momentum, eps);
}

std::string BatchNorm2d::extra_repr() const {
  return std::to_string(weight.size(0)) + ", eps=" + std::to_string(eps) + ", momentum=" + std::to_string(momentum);
}

FrozenBatchNorm2d::FrozenBatchNorm2d(int64_t channels, double eps_) : UnaryModule("FrozenBatchNorm2d"), eps(eps_) {
  MINIDET_CHECK(channels > 0, "FrozenBatchNorm2d: channels must be positive, got ", channels);
  weight = register_buffer("weight", ones({channels}));
  bias = register_buffer("bias", zeros({channels}));
  running_mean = register_buffer("running_mean", zeros({channels}));
  running_var = register_buffer("running_var", ones({channels}));
}

Tensor FrozenBatchNorm2d::forward(const Tensor& input) {
  return frozen_batch_norm2d(input, weight, bias, running_mean, running_var, eps);
}

std::string FrozenBatchNorm2d::extra_repr() const {
  return std::to_string(weight.size(0)) + ", eps=" + std::to_string(eps);
}

}  // namespace minidet::nn
