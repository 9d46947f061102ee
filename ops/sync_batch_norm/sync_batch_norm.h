// Synchronized batch normalization (SyncBatchNorm: Peng et al. 2018, MegDet; PyTorch's
// torch.nn.SyncBatchNorm): batch_norm2d (ops/batch_norm/batch_norm.h) over a global batch that is spread
// over R processes (ranks), each holding its own N_r images. Every rank normalises with the statistics of
// all the images, so the result does not depend on how many ranks share the batch.
//
// Forward in training, per channel c. Rank r holds M_r = N_r * H * W values x of the channel; K[c] is a
// shift that is the same on every rank (the running mean when given, else 0). Any K gives the same
// statistics; one near the mean keeps the subtraction in var accurate.
//   local, 2C + 1 numbers:   M_r,   S_r = sum(x),   Q_r = sum((x - K)^2)
//   one all-reduce (sum over ranks, float64):   M = sum_r M_r,   S = sum_r S_r,   Q = sum_r Q_r
//   mean = S / M,   var = max(0, Q / M - (mean - K)^2)                           (biased: the normalizer)
//   invstd = 1 / sqrt(var + eps),   xhat = (x - mean) * invstd,   y = gamma * xhat + beta
//   running_mean <- (1 - momentum) * running_mean + momentum * mean
//   running_var  <- (1 - momentum) * running_var  + momentum * var * M / (M - 1)  (the same on every rank)
//
// Backward (dy upstream on each rank, sums over this rank's values):
//   local, 2C numbers:   sum(dy),   sum(dy * (x - mean))
//   one all-reduce:      G1 = the sum of sum(dy) over ranks,   G2 = the same of sum(dy * (x - mean))
//   dx     = gamma * invstd * (dy - G1 / M - xhat * G2 * invstd / M)
//   dgamma = sum(dy * xhat),   dbeta = sum(dy)                                  (this rank's own sums)
// x on one rank moves every rank's mean and variance, so dx is the gradient of the sum of all ranks'
// losses with respect to this rank's x. dgamma and dbeta stay local, as PyTorch's: data-parallel training
// then averages every parameter's gradient over the ranks (dist/ddp.h), and for gamma and beta, as for the
// layers before this one, that average is the gradient of the mean of the ranks' losses.
//
// Eval mode uses the running statistics and is batch_norm2d itself: nothing is communicated. With one rank
// (an all-reduce that is the identity) the forward and backward are batch_norm2d's up to rounding: the
// variance comes from the shifted sums instead of batch_norm2d's two passes.
//
// The op does not know the transport: `all_reduce_sum` turns a contiguous float64 tensor on the input's
// device into its sum over the ranks, in place (dist::ProcessGroup's MPI or NCCL all-reduce). Every rank
// must call the op, and its backward, in the same order, with inputs of the same C, H, W and dtype; N may
// differ, and be 0 on some ranks.
#pragma once

#include <functional>

#include "core/tensor.h"

namespace minidet {

using AllReduceSum = std::function<void(const Tensor&)>;

Tensor sync_batch_norm2d(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                         const Tensor& weight, const Tensor& bias, bool training, const AllReduceSum& all_reduce_sum,
                         double momentum = 0.1, double eps = 1e-5);

}  // namespace minidet
