#include "nn/layers/batch_norm.h"

#include <utility>

#include "core/factories.h"
#include "ops/batch_norm/batch_norm.h"
#include "ops/sync_batch_norm/sync_batch_norm.h"
#include "ops/elementwise/binary.h"

namespace minidet::nn {

BatchNorm2d::BatchNorm2d(int64_t channels, double eps_, double momentum_)
    : BatchNorm2d("BatchNorm2d", channels, eps_, momentum_) {}

BatchNorm2d::BatchNorm2d(const char* type, int64_t channels, double eps_, double momentum_)
    : UnaryModule(type), eps(eps_), momentum(momentum_) {
  MINIDET_CHECK(channels > 0, type, ": channels must be positive, got ", channels);
  weight = register_parameter("weight", ones({channels}));
  bias = register_parameter("bias", zeros({channels}));
  running_mean = register_buffer("running_mean", zeros({channels}));
  running_var = register_buffer("running_var", ones({channels}));
  num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
}

void BatchNorm2d::count_batch() {
  if (!is_training()) return;
  NoGradGuard no_grad;
  num_batches_tracked.copy_(num_batches_tracked + 1.0);
}

Tensor BatchNorm2d::forward(const Tensor& input) {
  count_batch();
  return batch_norm2d(input, running_mean, running_var, weight, bias, is_training(), momentum, eps);
}

namespace {
SyncBatchNormGroup& installed_group() {
  static SyncBatchNormGroup group;
  return group;
}
}  // namespace

void set_sync_batch_norm_group(SyncBatchNormGroup group) {
  MINIDET_CHECK(group.size >= 1, "set_sync_batch_norm_group: size must be at least 1, got ", group.size);
  MINIDET_CHECK(group.size == 1 || group.all_reduce_sum, "set_sync_batch_norm_group: ", group.size,
                " ranks need an all-reduce");
  installed_group() = std::move(group);
}

const SyncBatchNormGroup& sync_batch_norm_group() { return installed_group(); }

SyncBatchNorm2d::SyncBatchNorm2d(int64_t channels, double eps_, double momentum_)
    : BatchNorm2d("SyncBatchNorm2d", channels, eps_, momentum_) {}

Tensor SyncBatchNorm2d::forward(const Tensor& input) {
  const SyncBatchNormGroup& group = sync_batch_norm_group();
  if (!is_training() || group.size == 1) return BatchNorm2d::forward(input);
  count_batch();
  return sync_batch_norm2d(input, running_mean, running_var, weight, bias, true, group.all_reduce_sum, momentum, eps);
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
