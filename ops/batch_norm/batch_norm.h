// Batch normalization (Ioffe & Szegedy 2015) over the channels of NCHW input, and its frozen (inference-only)
// form.
//
// batch_norm2d, per channel c, over the M = N*H*W values x of that channel:
//   training:  mean = sum(x) / M,   var = sum((x - mean)^2) / M          (biased: the normalizer)
//              running_mean <- (1 - momentum) * running_mean + momentum * mean
//              running_var  <- (1 - momentum) * running_var  + momentum * var * M / (M - 1)   (unbiased)
//              (updated in place, outside autograd, when given; PyTorch's semantics)
//   eval:      mean, var = running_mean, running_var
//   invstd = 1 / sqrt(var + eps),   xhat = (x - mean) * invstd,   y = gamma * xhat + beta
//
// Backward (dy upstream, sums over the channel's M values):
//   dbeta  = sum(dy)
//   dgamma = sum(dy * xhat)
//   dx     = gamma * invstd / M * (M * dy - sum(dy) - xhat * sum(dy * xhat))     training: mean and var
//            depend on x, which adds the two centering terms;
//   dx     = gamma * invstd * dy                                                  eval: statistics are constants.
// weight (gamma) and bias (beta) are optional (undefined Tensor(): 1 and 0). Running stats are buffers,
// never differentiated; they are optional in training and required in eval.
//
// frozen_batch_norm2d (torchvision's FrozenBatchNorm2d, for pretrained backbones):
//   scale = weight / sqrt(running_var + eps),  shift = bias - running_mean * scale,  y = x * scale + shift
//   dx = dy * scale; the statistics and affine parameters are fixed, so they get no gradient.
//
// Per-channel sums accumulate in float64 on both devices; CUDA reduces each channel in one block with a
// fixed tree, so results are deterministic.
#pragma once

#include "core/tensor.h"

namespace minidet {

Tensor batch_norm2d(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                    const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                    double eps = 1e-5);

Tensor frozen_batch_norm2d(const Tensor& input, const Tensor& weight, const Tensor& bias,
                           const Tensor& running_mean, const Tensor& running_var, double eps = 1e-5);

}  // namespace minidet
