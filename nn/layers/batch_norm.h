// BatchNorm2d, SyncBatchNorm2d and FrozenBatchNorm2d layers (the ops and their math:
// ops/batch_norm/batch_norm.h, ops/sync_batch_norm/sync_batch_norm.h).
//
// BatchNorm2d: in training mode normalises with the batch's statistics and updates running_mean and
// running_var (momentum 0.1, unbiased variance); in eval mode uses the running statistics. weight starts at
// 1, bias at 0. FrozenBatchNorm2d holds all four as buffers: a fixed affine map, as detection backbones
// use when their batches are too small for reliable statistics.
//
// SyncBatchNorm2d (PyTorch's nn.SyncBatchNorm): BatchNorm2d whose training statistics are those of the
// global batch of every rank of a data-parallel job, through the process-wide SyncBatchNormGroup. dist/
// installs it when a job has more than one rank (dist::ProcessGroup::world()); with one rank, or in eval
// mode, SyncBatchNorm2d is BatchNorm2d exactly. Same parameters, buffers and checkpoint names.
#pragma once

#include "nn/module/module.h"
#include "ops/sync_batch_norm/sync_batch_norm.h"

namespace minidet::nn {

class BatchNorm2d : public UnaryModule {
 public:
  explicit BatchNorm2d(int64_t channels, double eps = 1e-5, double momentum = 0.1);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  double eps, momentum;

 protected:
  BatchNorm2d(const char* type, int64_t channels, double eps, double momentum);
  void count_batch();  // num_batches_tracked += 1 in training
};

// The ranks SyncBatchNorm2d layers normalise over: their number and the in-place all-reduce sum.
struct SyncBatchNormGroup {
  int size = 1;
  AllReduceSum all_reduce_sum;
};
// Process-wide, like PyTorch's default process group; {} (one rank) until dist/ installs one.
void set_sync_batch_norm_group(SyncBatchNormGroup group);
const SyncBatchNormGroup& sync_batch_norm_group();

class SyncBatchNorm2d final : public BatchNorm2d {
 public:
  explicit SyncBatchNorm2d(int64_t channels, double eps = 1e-5, double momentum = 0.1);
  Tensor forward(const Tensor& input) override;
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
